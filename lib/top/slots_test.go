package top

import (
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fig71 is thesis fig. 7.1 in small: 4 nodes × 4 slots, job A on global
// slots 0–5 and job B on 6–13. exact adds the master's slot map.
func fig71(exact bool) SnapshotMsg {
	var nodes []wire.NodeInfo
	for i, n := range []string{"node0", "node1", "node2", "node3"} {
		nodes = append(nodes, wire.NodeInfo{Name: n, Index: uint32(i), Slots: 4, State: wire.NodeUp})
	}
	a := wire.JobInfo{ID: 1, Job: "f.1", App: "a", State: wire.JobStateRunning, Size: 6, NextRank: 6,
		Placement: []wire.Placement{pl("node0", 0, 3), pl("node1", 4, 5)}}
	b := wire.JobInfo{ID: 2, Job: "f.2", App: "b", State: wire.JobStateRunning, Size: 8, NextRank: 8,
		Placement: []wire.Placement{pl("node1", 0, 1), pl("node2", 2, 5), pl("node3", 6, 7)}}
	st := wire.DVMState{ID: "f", Uptime: int64(time.Minute), Nodes: nodes, Jobs: []wire.JobInfo{a, b}}
	if exact {
		st.Slots = fig71Slots(-1)
	}
	return SnapshotMsg{State: st, At: t0}
}

// fig71Slots is the slot map of fig71 without global slot gone (-1: none).
func fig71Slots(gone int32) []wire.SlotUse {
	var out []wire.SlotUse
	for s := int32(0); s < 14; s++ {
		su := wire.SlotUse{Slot: s, Node: uint32(s / 4), Job: "f.1", Rank: uint32(s)}
		if s >= 6 {
			su.Job, su.Rank = "f.2", uint32(s-6)
		}
		if s != gone {
			out = append(out, su)
		}
	}
	return out
}

func slotRow(m *Model, node string) string {
	for _, l := range m.slotLines(80, 10) {
		if strings.HasPrefix(l, node+" ") {
			return l
		}
	}
	return ""
}

// A process that leaves makes a gap at its own slot, and the slot map
// shows the gap at once (from the event) and after the map is fetched
// again. Without a map (older master) the layout packs by job and rank.
func TestSlotMapExact(t *testing.T) {
	var screens []string
	shot := func(title string, m *Model) {
		screens = append(screens, "# "+title+"\n"+strings.Join(m.slotLines(80, 10), "\n"))
	}
	exit := func(rank uint32) EventsMsg {
		return EventsMsg{{Seq: 1, Kind: wire.EvProcState, Job: "f.1", Ranks: wire.Span(rank, rank), Node: "node0", State: wire.ProcStateExited}}
	}

	m := feed(newModel(Config{}), fig71(true))
	shot("fig. 7.1: A on slots 0-5, B on 6-13", m)
	for node, want := range map[string]string{
		"node0": "│A0 A1 A2 A3 │ 4/4", "node1": "│A4 A5 B0 B1 │ 4/4",
		"node2": "│B2 B3 B4 B5 │ 4/4", "node3": "│B6 B7 ·  ·  │ 2/4",
	} {
		if r := slotRow(m, node); !strings.Contains(r, want) {
			t.Errorf("%s: %q, want %q", node, r, want)
		}
	}

	// A's slot 3 freed: the gap is node0's slot 3, by the event alone,
	// then by the fresh map.
	feed(m, exit(3))
	if r := slotRow(m, "node0"); !strings.Contains(r, "│A0 A1 A2 ·  │ 3/4") {
		t.Errorf("node0 after the exit event: %q", r)
	}
	feed(m, SlotsMsg(fig71Slots(3)))
	shot("A's slot 3 freed", m)
	if r := slotRow(m, "node0"); !strings.Contains(r, "│A0 A1 A2 ·  │ 3/4") {
		t.Errorf("node0 after the fresh map: %q", r)
	}

	// A gap inside the run of a job stays where it is: only the exact
	// map can tell (the fallback packs the ranks to the left).
	m = feed(newModel(Config{}), fig71(true), exit(1), SlotsMsg(fig71Slots(1)))
	shot("A's slot 1 freed", m)
	if r := slotRow(m, "node0"); !strings.Contains(r, "│A0 ·  A2 A3 │ 3/4") {
		t.Errorf("node0, slot 1 freed: %q", r)
	}
	// A process the map does not hold yet takes the node's first free slot.
	feed(m, EventsMsg{{Seq: 2, Kind: wire.EvProcState, Job: "f.2", Ranks: wire.Span(8, 8), Node: "node0", State: wire.ProcStateRunning}})
	if r := slotRow(m, "node0"); !strings.Contains(r, "│A0 B8 A2 A3 │ 4/4") {
		t.Errorf("node0, new process before the map: %q", r)
	}

	old := feed(newModel(Config{}), fig71(false), exit(1))
	shot("older master (no slot map), A's slot 1 freed: approximate", old)
	if r := slotRow(old, "node0"); !strings.Contains(r, "│A0 A2 A3 ·  │ 3/4") {
		t.Errorf("fallback node0: %q", r)
	}
	golden(t, "slots-fig71", strings.Join(screens, "\n\n")+"\n")
}
