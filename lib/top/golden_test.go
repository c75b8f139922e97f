package top

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite the golden screens under testdata/")

// golden compares a screen with testdata/<name>.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./lib/top -run Golden -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run with -update to accept):\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

// The screens at the two sizes of the issue, and the other views, with a
// fixed clock, fixed data and no colour.
func TestGoldenScreens(t *testing.T) {
	cases := []struct {
		name string
		w, h int
		msgs []tea.Msg
	}{
		{"main-80x24", 80, 24, nil},
		{"main-120x40", 120, 40, nil},
		{"focus-psets-120x40", 120, 40, []tea.Msg{keyMsg("tab"), keyMsg("j")}},
		{"detail-80x24", 80, 24, []tea.Msg{keyMsg("enter")}},
		{"detail-120x40", 120, 40, []tea.Msg{keyMsg("enter")}},
		{"help-80x24", 80, 24, []tea.Msg{keyMsg("?")}},
		{"confirm-80x24", 80, 24, []tea.Msg{keyMsg("a"), keyMsg("backspace"), keyMsg("4"), keyMsg("enter")}},
		{"lost-wait-80x24", 80, 24, []tea.Msg{LostMsg{At: t0.Add(5 * time.Second)}}},
		{"paused-80x24", 80, 24, []tea.Msg{keyMsg("z"), TickMsg(t0.Add(time.Second))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := feed(newModel(Config{Wait: true, Request: func(wire.RCRequest) tea.Cmd { return nil }}), scene()...)
			m.Update(tea.WindowSizeMsg{Width: c.w, Height: c.h})
			feed(m, c.msgs...)
			golden(t, c.name, m.View()+"\n")
		})
	}
}

// 1,024 processes on 40 nodes of 28 slots: the compact slot map.
func TestGoldenBig(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		m := feed(newModel(Config{}), tea.WindowSizeMsg{Width: size[0], Height: size[1]}, bigScene(40, 28, 1024))
		golden(t, "big-"+itoa(size[0])+"x"+itoa(size[1]), m.View()+"\n")
	}
}

// With a colour profile, cells are coloured by job: the two jobs of the
// scene get different background colours, and the plain text under the
// colours is the plain golden.
func TestGoldenColour(t *testing.T) {
	m := feed(newModel(Config{Renderer: colour()}), scene()...)
	v := m.View()
	golden(t, "colour-80x24", v+"\n")
	if !strings.Contains(v, "\x1b[") {
		t.Fatal("no colour at all")
	}
	lu := NewStyles(colour()).Job(1).Render("A8  A9  A12 A13 ")
	sl := NewStyles(colour()).Job(2).Render("B0  B1  ")
	if lu == sl || !strings.Contains(v, lu) || !strings.Contains(v, sl) {
		t.Errorf("job cells not coloured by job:\n%q", v)
	}
	plainView := feed(newModel(Config{}), scene()...).View()
	if stripped(v) != plainView {
		t.Error("colour and plain screens differ in text")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// Hosts arriving and leaving (dvm grow, dvm shrink): the snapshot has
// node4, which joined; then node3 begins to leave and node2 leaves: the
// slot map marks node3 and drops node2 at once, and the events pane tells
// the story.
func TestGoldenNodesGrowShrink(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	snap := scene()[1].(SnapshotMsg)
	snap.State.Nodes = append(snap.State.Nodes, wire.NodeInfo{Name: "node4", Index: 4, Slots: 4, State: wire.NodeUp})
	feed(m, snap, EventsMsg{
		{Seq: 50, Time: at(100 * time.Millisecond), Kind: wire.EvNodeUp, Node: "node4"},
		{Seq: 51, Time: at(100 * time.Millisecond), Kind: wire.EvNodeAdded, Node: "node4", Msg: "node node4 joined the DVM: 4 slots on host h4"},
		{Seq: 52, Time: at(200 * time.Millisecond), Kind: wire.EvNodeLeaving, Node: "node3", Msg: "node node3 is leaving the DVM"},
		{Seq: 53, Time: at(300 * time.Millisecond), Kind: wire.EvNodeDown, Node: "node2", Msg: "daemon of node node2 stopped: the node leaves the DVM"},
		{Seq: 54, Time: at(300 * time.Millisecond), Kind: wire.EvNodeRemoved, Node: "node2", Msg: "node node2 left the DVM"},
	})
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		golden(t, "nodes-grow-shrink-"+itoa(size[0])+"x"+itoa(size[1]), m.View()+"\n")
	}
}

// A DVM started with a host list that does not name the master's host:
// node 0 (h0) has no slots, its processes are on the other nodes. The
// slot map shows h0 with no cells and nothing breaks.
func TestGoldenZeroSlotNode(t *testing.T) {
	snap := bigScene(3, 4, 6)
	nodes := []wire.NodeInfo{{Name: "h0", Index: 0, Slots: 0, State: wire.NodeUp}}
	for _, n := range snap.State.Nodes {
		n.Index++
		nodes = append(nodes, n)
	}
	snap.State.Nodes = nodes
	m := feed(newModel(Config{}), tea.WindowSizeMsg{Width: 80, Height: 24}, snap)
	golden(t, "zero-slot-node-80x24", m.View()+"\n")
}

// TestFailureCauseShown: a failure change (made by the runtime under
// --on-failure shrink) shows its cause in the change view and in the
// event log.
func TestFailureCauseShown(t *testing.T) {
	msgs := scene()
	cause := &wire.RCCause{Kind: wire.CauseFailure, Ranks: wire.Span(10, 11),
		Why: []string{"rank 10 on node1 was lost with its node (daemon gone)", "rank 11 on node1 was lost with its node (daemon gone)"}}
	snap := msgs[1].(SnapshotMsg)
	snap.RCs[0].Requester, snap.RCs[0].Cause = wire.ByRuntime, cause
	msgs[1] = snap
	evs := msgs[3].(EventsMsg)
	evs[0].RC.Cause = cause
	m := feed(newModel(Config{Wait: true, Request: func(wire.RCRequest) tea.Cmd { return nil }}), msgs...)
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 50})
	view := m.View()
	for _, want := range []string{"failure of ranks 10-11", "[failure: rank 10 on node1"} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %q:\n%s", want, view)
		}
	}
}
