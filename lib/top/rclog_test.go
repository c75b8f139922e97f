package top

import (
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// The master publishes an ADD twice while ANNOUNCED (told, then its new
// processes started): the log must show two different steps, not the
// same line twice. A step that matches the status is not repeated, and
// the event's own message wins.
func TestRCLogNamesStep(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	ann := wire.RC{Delta: "mpi://rte/lu/rc/9", Job: "k3j9.1", Type: wire.RCAdd, N: 16, Status: wire.RCAnnounced, Seq: 1,
		Times: wire.RCTimes{Requested: at(0), Placed: at(time.Millisecond), Defined: at(2 * time.Millisecond),
			JobData: at(3 * time.Millisecond), Announced: at(3 * time.Millisecond)}}
	started := ann
	started.Seq = 2
	started.Times.Launched, started.Times.Started = at(4*time.Millisecond), at(9*time.Millisecond)
	fin := started
	fin.Seq, fin.Status, fin.Times.Finalized = 3, wire.RCFinalized, at(20*time.Millisecond)
	cases := []struct {
		ev   wire.Event
		want string
	}{
		{wire.Event{Kind: wire.EvRCState, Job: "k3j9.1", RC: &ann}, "rc/9 ADD 16 ANNOUNCED"},
		{wire.Event{Kind: wire.EvRCState, Job: "k3j9.1", RC: &started}, "rc/9 ADD 16 ANNOUNCED (started)"},
		{wire.Event{Kind: wire.EvRCState, Job: "k3j9.1", RC: &fin}, "rc/9 ADD 16 FINALIZED"},
		{wire.Event{Kind: wire.EvRCState, Job: "k3j9.1", RC: &fin, Msg: "settled"}, "rc/9 ADD 16 FINALIZED (settled)"},
	}
	var lines []string
	for _, c := range cases {
		got := strings.TrimRight(m.eventText(c.ev), " ")
		if !strings.HasSuffix(got, c.want) {
			t.Errorf("log line %q, want it to end with %q", got, c.want)
		}
		lines = append(lines, got)
	}
	if lines[0] == lines[1] {
		t.Errorf("two steps of one status log the same line %q", lines[0])
	}
}

// After a reconnection to the same DVM the feeder replays the bus again:
// events already applied are not logged twice; a restarted master's
// events (numbered afresh) are applied.
func TestStateReplayOnce(t *testing.T) {
	s := NewState()
	snap := Snapshot{State: wire.DVMState{ID: "d", Started: at(0)}}
	s.ApplySnapshot(snap)
	evs := []wire.Event{
		{Seq: 1, Kind: wire.EvJobState, Job: "d.1", State: wire.JobStateRunning},
		{Seq: 2, Kind: wire.EvProcState, Job: "d.1", Ranks: wire.Span(0, 1), Node: "n0", State: wire.ProcStateRunning},
	}
	for _, ev := range evs {
		s.ApplyEvent(ev)
	}
	s.ApplySnapshot(snap) // reconnected: same DVM
	for _, ev := range append(evs, wire.Event{Seq: 3, Kind: wire.EvProcState, Job: "d.1", Ranks: wire.Span(2, 2), Node: "n0", State: wire.ProcStateRunning}) {
		s.ApplyEvent(ev)
	}
	if len(s.Log) != 3 || s.Events != 3 || s.LastSeq != 3 {
		t.Fatalf("log %d events %d last %d after the replay, want 3 3 3", len(s.Log), s.Events, s.LastSeq)
	}
	restarted := Snapshot{State: wire.DVMState{ID: "d", Started: at(time.Hour)}}
	s.ApplySnapshot(restarted)
	s.ApplyEvent(wire.Event{Seq: 1, Kind: wire.EvJobState, Job: "d.2", State: wire.JobStateRunning})
	if len(s.Log) != 4 || s.Job("d.2") == nil {
		t.Errorf("a restarted master's first event was dropped: log %d", len(s.Log))
	}
}
