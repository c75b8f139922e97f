package top

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dynrt/dynrt/wire"
)

// benchEvents makes one second of a busy bus (1,000 events) on the
// 1,024-process job of bigScene: processes stopping and starting again,
// set updates with members, and change records.
func benchEvents() []wire.Event {
	evs := make([]wire.Event, 0, 1000)
	for i := range 1000 {
		r := uint32(i * 7 % 1024)
		ev := wire.Event{Seq: uint64(i + 1), Time: at(time.Duration(i) * time.Millisecond), Job: "big.1"}
		switch i % 10 {
		case 0, 1, 2, 3:
			ev.Kind, ev.State, ev.Ranks = wire.EvProcState, wire.ProcStateExited, wire.Span(r, r)
		case 4, 5, 6, 7:
			ev.Kind, ev.State, ev.Ranks, ev.Node = wire.EvProcState, wire.ProcStateRunning, wire.Span(r, r), nodeOf(r)
		case 8:
			m := wire.RankRanges{{Lo: 0, Hi: r}, {Lo: r + 2, Hi: 1023}}
			ev.Kind, ev.Pset = wire.EvPsetDef, &wire.PsetInfo{Name: "mpi://app/big/grid", Version: uint32(i), Size: uint32(m.Count()), Members: m, Active: true}
		case 9:
			ev.Kind = wire.EvRCState
			ev.RC = &wire.RC{Delta: "mpi://rte/big/rc/1", Job: "big.1", Type: wire.RCAdd, N: 4, Status: wire.RCAnnounced, Seq: uint64(i),
				Times: wire.RCTimes{Requested: at(0), Placed: at(time.Millisecond)}}
		}
		evs = append(evs, ev)
	}
	return evs
}

func nodeOf(r uint32) string { return "node" + string(rune('0'+r/28/10)) + string(rune('0'+r/28%10)) }

// BenchmarkFrame is one frame of dyntop under a 1,000 events/s stream:
// the feeder delivers the events of one 16 ms window as a batch (about
// 17 events), the model applies them and renders the 120×40 screen with a
// 1,024-process job. ns/op is the time per frame; the target is 16 ms.
func BenchmarkFrame(b *testing.B) {
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		b.Run(itoa(size[0])+"x"+itoa(size[1]), func(b *testing.B) {
			m := feed(newModel(Config{Renderer: colour()}), tea.WindowSizeMsg{Width: size[0], Height: size[1]}, bigScene(40, 28, 1024))
			m.Update(PsetsMsg{Job: "big.1", Sets: []wire.PsetInfo{
				pinfo("mpi://WORLD", wire.Span(0, 1023), true, 0, 0),
				pinfo("mpi://app/big", wire.Span(0, 1023), false, 0, 0),
				pinfo("mpi://app/big/grid", wire.Span(0, 1023), true, 0, 0),
			}})
			evs := benchEvents()
			const perFrame = 17 // 1,000 events/s at 60 frames/s
			applied := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := (i * perFrame) % len(evs)
				batch := evs[k:min(k+perFrame, len(evs))]
				m.Update(EventsMsg(batch))
				applied += len(batch)
				if len(m.View()) == 0 {
					b.Fatal("empty frame")
				}
			}
			b.StopTimer()
			// nothing was dropped: every event was applied
			if m.st.Events != uint64(applied) {
				b.Fatalf("applied %d of %d events", m.st.Events, applied)
			}
		})
	}
}
