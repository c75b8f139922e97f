package top

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dynrt/dynrt/wire"
)

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func press(m *Model, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		_, cmd = m.Update(keyMsg(k))
	}
	return cmd
}

func TestViewSize(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	for _, size := range [][2]int{{80, 24}, {120, 40}, {60, 15}, {200, 60}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for _, mode := range []string{"main", "help", "detail"} {
			switch mode {
			case "help":
				m.showHelp = true
			case "detail":
				m.showHelp, m.detail = false, true
			}
			lines := strings.Split(m.View(), "\n")
			if len(lines) != size[1] {
				t.Errorf("%dx%d %s: %d lines", size[0], size[1], mode, len(lines))
			}
			for i, l := range lines {
				if n := len([]rune(l)); n != size[0] {
					t.Errorf("%dx%d %s: line %d has %d cells: %q", size[0], size[1], mode, i, n, l)
					break
				}
			}
		}
		m.detail = false
	}
}

func TestPanesAndSelection(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	if m.focus != PaneJobs || m.selected().Info.App != "lu" {
		t.Fatalf("start: focus %v, job %v", m.focus, m.selected().Info.App)
	}
	press(m, "tab")
	if m.focus != PanePsets || !strings.Contains(m.View(), "▶ process sets of lu") {
		t.Errorf("tab: focus %v", m.focus)
	}
	press(m, "tab", "tab", "tab")
	if m.focus != PaneJobs {
		t.Errorf("tab wraps: %v", m.focus)
	}
	press(m, "shift+tab")
	if m.focus != PaneEvents {
		t.Errorf("shift-tab: %v", m.focus)
	}
	press(m, "tab", "j")
	if m.selected().Info.App != "sleep" || !strings.Contains(m.View(), "process sets of sleep") {
		t.Errorf("j: selected %v", m.selected().Info.App)
	}
	press(m, "down", "down", "down")
	if m.selected().Info.App != "hello" {
		t.Errorf("down stops at the last job: %v", m.selected().Info.App)
	}
	press(m, "k", "up", "up")
	if m.selected().Info.App != "lu" {
		t.Errorf("up stops at the first job: %v", m.selected().Info.App)
	}
	// the set tree has its own cursor
	press(m, "tab", "j", "j")
	if m.psetSel != 2 {
		t.Errorf("pset cursor %d", m.psetSel)
	}
	// enter opens the job, esc goes back
	press(m, "enter")
	v := m.View()
	if !m.detail || !strings.Contains(v, "job lu (k3j9.1)") || !strings.Contains(v, "placement") || !strings.Contains(v, "node1") {
		t.Errorf("detail view:\n%s", v)
	}
	press(m, "esc")
	if m.detail {
		t.Error("esc did not close the detail view")
	}
}

func TestFilter(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	press(m, "/")
	if m.mode != modeFilter || !strings.Contains(m.View(), "filter:") {
		t.Fatalf("/ did not open the filter")
	}
	press(m, "s", "l", "e", "enter")
	if m.filter != "sle" || m.mode != modeNone {
		t.Fatalf("filter %q mode %v", m.filter, m.mode)
	}
	js := m.visibleJobs()
	if len(js) != 1 || js[0].Info.App != "sleep" {
		t.Errorf("filtered jobs: %d", len(js))
	}
	if v := m.View(); strings.Contains(v, "rc/1 SUB 2 FINALIZED") || !strings.Contains(v, "no event yet") {
		t.Errorf("events not filtered:\n%s", v)
	}
	press(m, "/", "esc")
	if m.filter != "" || len(m.visibleJobs()) != 3 {
		t.Errorf("esc did not clear the filter: %q", m.filter)
	}
}

func TestHelpAndQuit(t *testing.T) {
	m := feed(newModel(Config{ReadOnly: true}), scene()...)
	press(m, "?")
	v := m.View()
	if !strings.Contains(v, "dyntop keys") || !strings.Contains(v, "shift-tab") || strings.Contains(v, "add procs") || !strings.Contains(v, "read-only") {
		t.Errorf("help (read-only):\n%s", v)
	}
	if cmd := press(m, "x"); cmd != nil || m.showHelp {
		t.Error("a key did not close the help")
	}
	if !isQuit(press(m, "q")) {
		t.Error("q does not quit")
	}
	if !isQuit(press(m, "ctrl+c")) {
		t.Error("ctrl+c does not quit")
	}
}

func TestPauseHoldsUpdates(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	press(m, "z")
	if !strings.Contains(m.View(), "PAUSED") {
		t.Error("no PAUSED mark")
	}
	m.Update(EventsMsg{{Seq: 99, Kind: wire.EvJobState, Job: "k3j9.2", State: wire.JobStateDone}})
	if !m.st.Job("k3j9.2").Live() || len(m.queue) != 1 {
		t.Fatal("an update went through while paused")
	}
	press(m, "z")
	if m.st.Job("k3j9.2").Live() || len(m.queue) != 0 || strings.Contains(m.View(), "PAUSED") {
		t.Error("resume did not apply the held update")
	}
}

func TestAddSubPrompt(t *testing.T) {
	var got []wire.RCRequest
	req := func(r wire.RCRequest) tea.Cmd {
		got = append(got, r)
		return func() tea.Msg {
			return RCResultMsg{RC: wire.RC{Delta: "mpi://rte/lu/rc/3", Job: r.Job, Type: r.Type, N: r.N, Status: wire.RCAnnounced}}
		}
	}
	m := feed(newModel(Config{Request: req}), scene()...)
	press(m, "a")
	if m.mode != modeCount || !strings.Contains(m.View(), "processes to add to lu (k3j9.1): ") {
		t.Fatalf("a: mode %v\n%s", m.mode, m.View())
	}
	press(m, "backspace", "4", "enter")
	if m.mode != modeConfirm || !strings.Contains(m.View(), "Add 4 process(es) to lu (k3j9.1)? [y/N]") {
		t.Fatalf("confirm:\n%s", m.View())
	}
	cmd := press(m, "y")
	if len(got) != 1 || !reflect.DeepEqual(got[0], wire.RCRequest{Job: "k3j9.1", Type: wire.RCAdd, N: 4, Requester: wire.ByTool, RequesterID: "dyntop"}) {
		t.Fatalf("request %+v", got)
	}
	m.Update(cmd())
	if !strings.Contains(m.View(), "rc/3: add 4 process(es) of lu (k3j9.1): ANNOUNCED") || len(m.st.RCs) != 3 {
		t.Errorf("result:\n%s", m.View())
	}
	// sub, declined
	press(m, "s", "enter", "n")
	if len(got) != 1 || !strings.Contains(m.View(), "cancelled") {
		t.Errorf("declined sub sent a request: %+v", got)
	}
	// bad count
	press(m, "s", "backspace", "x", "enter")
	if m.mode != modeNone || !strings.Contains(m.View(), `"x" is not a positive number`) {
		t.Errorf("bad count:\n%s", m.View())
	}
	// failures are shown
	m.Update(RCResultMsg{Err: errors.New("busy: rc/2 in flight")})
	if !strings.Contains(m.View(), "request failed: busy: rc/2 in flight") {
		t.Error("error not shown")
	}
	// ended jobs cannot change
	press(m, "j", "j", "a")
	if m.mode != modeNone || !strings.Contains(m.View(), "select a running job") {
		t.Error("a on an ended job")
	}
}

func TestAddSubRefused(t *testing.T) {
	m := feed(newModel(Config{ReadOnly: true, Request: func(wire.RCRequest) tea.Cmd { t.Fatal("request in read-only mode"); return nil }}), scene()...)
	press(m, "a")
	if m.mode != modeNone || !strings.Contains(m.View(), "read-only") {
		t.Error("read-only a")
	}
	m = feed(newModel(Config{}), scene()...)
	press(m, "s")
	if m.mode != modeNone || !strings.Contains(m.View(), "cannot be requested") {
		t.Error("a without a request function")
	}
}

func TestLostAndWait(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	_, cmd := m.Update(LostMsg{At: t0.Add(time.Second), Err: errors.New("closed by peer")})
	if !isQuit(cmd) || m.Lost() == nil || !strings.Contains(m.View(), "DVM k3j9 stopped at 09:26:54 (closed by peer)") {
		t.Errorf("lost without wait:\n%s", m.View())
	}
	m = feed(newModel(Config{Wait: true}), scene()...)
	_, cmd = m.Update(LostMsg{At: t0.Add(time.Second)})
	if cmd != nil || !strings.Contains(m.View(), "waiting for it to come back") {
		t.Errorf("lost with wait:\n%s", m.View())
	}
	m.Update(ReconnectedMsg{ID: "zz99"})
	if m.Lost() != nil || !strings.Contains(m.View(), "attached to DVM zz99") {
		t.Error("reconnect")
	}
}

// The clock moves the uptime and the elapsed time of a change in flight.
func TestClock(t *testing.T) {
	ticks := 0
	m := feed(newModel(Config{Tick: func() tea.Cmd { ticks++; return nil }}), scene()...)
	m.Init()
	v := m.View()
	if !strings.Contains(v, "up 1h02m03s") || !strings.Contains(v, "ANNOUNCED 2.00s…") {
		t.Fatalf("before:\n%s", v)
	}
	m.Update(TickMsg(t0.Add(61 * time.Second)))
	v = m.View()
	if !strings.Contains(v, "up 1h03m04s") || !strings.Contains(v, "ANNOUNCED 1m03s…") || !strings.Contains(v, "09:27:54") || ticks != 2 {
		t.Errorf("after a tick (%d ticks):\n%s", ticks, v)
	}
	// A finished change shows its total, not the clock.
	if !strings.Contains(v, "FINALIZED 52ms") {
		t.Errorf("finalized total:\n%s", v)
	}
}

// The slot map follows the process events: a grow fills node2, a shrink
// empties it again.
func TestSlotMapFollowsEvents(t *testing.T) {
	m := feed(newModel(Config{}), scene()...)
	row := func(node string) string {
		for _, l := range strings.Split(m.View(), "\n") {
			if strings.HasPrefix(l, node+" ") {
				return l
			}
		}
		return ""
	}
	if !strings.Contains(row("node2"), "0/8") {
		t.Fatalf("node2 before: %q", row("node2"))
	}
	m.Update(EventsMsg{
		{Seq: 50, Kind: wire.EvProcState, Job: "k3j9.1", Ranks: wire.Span(14, 15), Node: "node1", State: wire.ProcStateRunning},
		{Seq: 51, Kind: wire.EvProcState, Job: "k3j9.1", Ranks: wire.Span(16, 17), Node: "node2", State: wire.ProcStateRunning},
	})
	if r := row("node2"); !strings.Contains(r, "A16 A17") || !strings.Contains(r, "2/8") {
		t.Errorf("node2 after the grow: %q", r)
	}
	if r := row("node1"); !strings.Contains(r, "A14 A15") || !strings.Contains(r, "8/8") {
		t.Errorf("node1 after the grow: %q", r)
	}
	m.Update(EventsMsg{{Seq: 52, Kind: wire.EvProcState, Job: "k3j9.1", Ranks: wire.Span(16, 17), State: wire.ProcStateExited}})
	if r := row("node2"); !strings.Contains(r, "0/8") || strings.Contains(r, "A16") {
		t.Errorf("node2 after the shrink: %q", r)
	}
}

// Many nodes: compact cells, several nodes per line, and a note for the
// nodes that do not fit.
func TestSlotMapCompact(t *testing.T) {
	m := feed(newModel(Config{}), tea.WindowSizeMsg{Width: 80, Height: 24}, bigScene(40, 28, 1024))
	v := m.View()
	if !strings.Contains(v, "node00 AAAAAAAAAAAAAAAAAAAAAAAAAAAA  node01 AAAA") {
		t.Errorf("compact map:\n%s", v)
	}
	if !strings.Contains(v, "more line(s) of nodes") {
		t.Errorf("no overflow note:\n%s", v)
	}
}

func TestNeedsOf(t *testing.T) {
	n := NeedsOf([]wire.Event{
		{Kind: wire.EvJobState, Job: "a"},
		{Kind: wire.EvJobState, Job: "a"},
		{Kind: wire.EvPsetDef, Job: "a", Pset: &wire.PsetInfo{Name: "x", Size: 2}},
		{Kind: wire.EvPsetDef, Job: "b", Pset: &wire.PsetInfo{Name: "y", Size: 1, Members: wire.Span(0, 0)}},
		{Kind: wire.EvProcState, Job: "c"},
	})
	if n.Snapshot || len(n.Jobs) != 1 || n.Jobs[0] != "a" || len(n.Psets) != 1 || n.Psets[0] != "a" {
		t.Errorf("needs %+v", n)
	}
	n.Merge(NeedsOf([]wire.Event{{Kind: wire.EvNodeDown, Node: "n1"}, {Kind: wire.EvJobState, Job: "b"}}))
	if !n.Snapshot || len(n.Jobs) != 2 || n.Empty() {
		t.Errorf("merged %+v", n)
	}
	if !n.Slots {
		t.Errorf("job and process events do not refresh the slot map: %+v", n)
	}
	if sl := NeedsOf([]wire.Event{{Kind: wire.EvPsetDef, Job: "a", Pset: &wire.PsetInfo{Name: "y", Size: 1, Members: wire.Span(0, 0)}}}); sl.Slots || !sl.Empty() {
		t.Errorf("a set event needs the slot map: %+v", sl)
	}
	if !NeedsOf([]wire.Event{{Kind: wire.EvRCState, Job: "a"}}).Slots {
		t.Error("an rc event does not refresh the slot map")
	}
	if !NeedsOf(nil).Empty() {
		t.Error("no events need something")
	}
}
