package top

import (
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/dynrt/dynrt/wire"
)

// t0 is the fake clock's start.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

func at(d time.Duration) int64 { return t0.Add(d).UnixNano() }

// plain is a renderer without colour: what goldens compare.
func plain() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	return r
}

// colour is a renderer with a fixed 256-colour profile.
func colour() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.ANSI256)
	return r
}

func newModel(cfg Config) *Model {
	if cfg.Renderer == nil {
		cfg.Renderer = plain()
	}
	if cfg.Now.IsZero() {
		cfg.Now = t0
	}
	cfg.Location = time.UTC
	return New(cfg)
}

func pl(node string, lo, hi uint32) wire.Placement {
	return wire.Placement{Node: node, Ranks: wire.Span(lo, hi)}
}

func pinfo(name string, members wire.RankRanges, active bool, ver, ep uint32) wire.PsetInfo {
	return wire.PsetInfo{Name: name, Members: members, Size: uint32(members.Count()), Active: active, Version: ver, Epoch: ep}
}

// scene is the fixture of the goldens: a DVM of 4 nodes × 8 slots, job lu
// (12 processes, one finished SUB, an ADD of 4 in flight), job sleep
// beside it, and an ended job.
func scene() []tea.Msg {
	nodes := []wire.NodeInfo{
		{Name: "node0", Index: 0, Slots: 8, State: wire.NodeUp},
		{Name: "node1", Index: 1, Slots: 8, State: wire.NodeUp},
		{Name: "node2", Index: 2, Slots: 8, State: wire.NodeUp},
		{Name: "node3", Index: 3, Slots: 8, State: wire.NodeUp},
	}
	lu := wire.JobInfo{ID: 1, Job: "k3j9.1", App: "lu", State: wire.JobStateRunning, Argv: []string{"./lu", "-n", "64"},
		Size: 12, NextRank: 14, Started: at(-90 * time.Second), Placement: []wire.Placement{pl("node0", 0, 7), {Node: "node1", Ranks: wire.RankRanges{{Lo: 8, Hi: 9}, {Lo: 12, Hi: 13}}}}}
	sl := wire.JobInfo{ID: 2, Job: "k3j9.2", App: "sleep", State: wire.JobStateRunning, Argv: []string{"/bin/sleep", "600"},
		Size: 2, NextRank: 2, Started: at(-60 * time.Second), Placement: []wire.Placement{pl("node1", 0, 1)}}
	ended := wire.JobInfo{ID: 3, Job: "k3j9.3", App: "hello", State: wire.JobStateFailed, Code: 3, Argv: []string{"./hello"},
		Started: at(-50 * time.Second), Ended: at(-49 * time.Second)}
	sub := wire.RC{Delta: "mpi://rte/lu/rc/1", Job: "k3j9.1", Type: wire.RCSub, Status: wire.RCFinalized, N: 2, Ranks: wire.Span(10, 11), Seq: 5,
		Times: wire.RCTimes{Requested: at(-40 * time.Second), Placed: at(-40*time.Second + 120*time.Microsecond),
			Defined: at(-40*time.Second + 700*time.Microsecond), JobData: at(-40*time.Second + 1100*time.Microsecond),
			Announced: at(-40*time.Second + 1300*time.Microsecond), Accepted: at(-40*time.Second + 31*time.Millisecond),
			Finalized: at(-40*time.Second + 52*time.Millisecond), Exited: at(-40*time.Second + 71*time.Millisecond)}}
	add := wire.RC{Delta: "mpi://rte/lu/rc/2", Job: "k3j9.1", Type: wire.RCAdd, Status: wire.RCAnnounced, N: 4, Ranks: wire.Span(14, 17), Seq: 3,
		Times: wire.RCTimes{Requested: at(-2 * time.Second), Placed: at(-2*time.Second + 150*time.Microsecond),
			Defined: at(-2*time.Second + 900*time.Microsecond), JobData: at(-2*time.Second + 1400*time.Microsecond),
			Announced: at(-2*time.Second + 1700*time.Microsecond), Launched: at(-2*time.Second + 2*time.Millisecond)}}
	lu.Delta = add.Delta
	snap := SnapshotMsg{
		State: wire.DVMState{ID: "k3j9", PID: 4242, Started: at(-3723 * time.Second), Uptime: int64(3723 * time.Second), Version: "v0.3.0",
			Nodes: nodes, Jobs: []wire.JobInfo{lu, sl, ended}},
		Name: "demo", RCs: []wire.RC{sub, add}, At: t0,
	}
	sets := PsetsMsg{Job: "k3j9.1", Sets: []wire.PsetInfo{
		pinfo("mpi://WORLD", wire.Span(0, 11), true, 0, 0),
		pinfo("mpi://app/lu", wire.RankRanges{{Lo: 0, Hi: 9}, {Lo: 12, Hi: 13}}, false, 2, 2),
		pinfo("mpi://app/lu/grid", wire.RankRanges{{Lo: 0, Hi: 9}, {Lo: 12, Hi: 13}}, true, 2, 2),
		pinfo("mpi://app/lu/roots", wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 8, Hi: 8}}, true, 0, 0),
		pinfo("mpi://rte/lu/rc/1", wire.Span(10, 11), true, 0, 1),
		pinfo("mpi://rte/lu/rc/2", wire.Span(14, 17), true, 0, 2),
	}}
	evs := EventsMsg{
		{Seq: 40, Time: at(-40*time.Second + 1300*time.Microsecond), Kind: wire.EvRCState, Job: "k3j9.1", RC: &wire.RC{Delta: sub.Delta, Type: wire.RCSub, N: 2, Status: wire.RCAnnounced}},
		{Seq: 41, Time: at(-40*time.Second + 52*time.Millisecond), Kind: wire.EvRCState, Job: "k3j9.1", RC: &sub},
		{Seq: 42, Time: at(-40*time.Second + 60*time.Millisecond), Kind: wire.EvProcState, Job: "k3j9.1", Ranks: wire.Span(10, 11), Node: "node1", State: wire.ProcStateExited},
		{Seq: 43, Time: at(-2*time.Second + 1700*time.Microsecond), Kind: wire.EvRCState, Job: "k3j9.1", RC: &add},
	}
	return []tea.Msg{tea.WindowSizeMsg{Width: 80, Height: 24}, snap, sets, evs}
}

func feed(m *Model, msgs ...tea.Msg) *Model {
	for _, msg := range msgs {
		m.Update(msg)
	}
	return m
}

// key builds a key press.
func keyMsg(s string) tea.KeyMsg {
	switch s {
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	if len([]rune(s)) != 1 {
		panic(fmt.Sprintf("keyMsg %q", s))
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// bigScene is a DVM of k nodes × s slots with one job of n processes
// placed by the stack policy (node after node).
func bigScene(k, s, n int) SnapshotMsg {
	var nodes []wire.NodeInfo
	var place []wire.Placement
	r := 0
	for i := range k {
		name := fmt.Sprintf("node%02d", i)
		nodes = append(nodes, wire.NodeInfo{Name: name, Index: uint32(i), Slots: uint32(s), State: wire.NodeUp})
		if r < n {
			hi := min(r+s, n) - 1
			place = append(place, pl(name, uint32(r), uint32(hi)))
			r = hi + 1
		}
	}
	job := wire.JobInfo{ID: 1, Job: "big.1", App: "big", State: wire.JobStateRunning, Size: uint32(n), NextRank: uint32(n), Placement: place, Started: at(-time.Minute)}
	return SnapshotMsg{State: wire.DVMState{ID: "big", Uptime: int64(time.Hour), Nodes: nodes, Jobs: []wire.JobInfo{job}}, At: t0}
}
