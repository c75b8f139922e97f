package top

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/wire"
)

// wide is the width from which the change panel and the event log sit side
// by side.
const wide = 110

// View renders the screen: exactly m.h lines of m.w cells.
func (m *Model) View() string {
	var lines []string
	switch {
	case m.showHelp:
		lines = m.helpView()
	case m.detail && m.selected() != nil:
		lines = m.detailView()
	default:
		lines = m.mainView()
	}
	return strings.Join(block(lines, m.h, m.w), "\n")
}

func (m *Model) mainView() []string {
	w := m.w
	out := m.header()
	body := m.h - len(out) - 1 // the footer takes the last line
	sideBySide := w >= wide
	titles := 4
	if sideBySide {
		titles = 3
	}
	rows := max(body-titles, 4)
	jobs := m.visibleJobs()
	jobRows := min(len(jobs)+1, max(3, rows/4))
	if j := m.selected(); j != nil {
		jobRows = max(jobRows, min(len(j.Psets)+1, max(3, rows/4)))
	}
	// The slot map gets a third of the rows, or more when the panes below
	// need little (a big DVM with few jobs and changes).
	below := min(max(len(m.st.RCs), 1), 3) + 3
	if sideBySide {
		below = 4
	}
	slotsNeed := len(m.slotLines(w, 1<<20))
	slotRows := min(slotsNeed, max(2, rows/3, rows-jobRows-below))
	rest := rows - slotRows - jobRows
	if rest < 2 { // tiny terminal: shrink the slot map first
		give := min(2-rest, slotRows-1)
		slotRows -= give
		rest += give
	}

	out = append(out, m.title("slots (node × slot, coloured by job)", -1, w))
	out = append(out, block(m.slotLines(w, slotRows), slotRows, w)...)

	lw := w * 11 / 20
	rw := w - lw - 1
	out = append(out, m.title("jobs", PaneJobs, lw)+" "+m.title(m.psetTitle(), PanePsets, rw))
	out = append(out, beside(block(m.jobLines(jobs, lw, jobRows), jobRows, lw), block(m.psetLines(rw, jobRows), jobRows, rw), " ")...)

	if sideBySide {
		cw := w / 2
		ew := w - cw - 1
		out = append(out, m.title("resource changes", PaneRCs, cw)+" "+m.title(m.eventsTitle(), PaneEvents, ew))
		out = append(out, beside(block(m.rcLines(cw, rest), rest, cw), block(m.eventLines(ew, rest), rest, ew), " ")...)
	} else {
		rcRows := min(max(len(m.st.RCs), 1), max(1, rest/3))
		evRows := max(rest-rcRows-1, 0)
		out = append(out, m.title("resource changes", PaneRCs, w))
		out = append(out, block(m.rcLines(w, rcRows), rcRows, w)...)
		out = append(out, m.title(m.eventsTitle(), PaneEvents, w))
		out = append(out, block(m.eventLines(w, evRows), evRows, w)...)
	}
	out = block(out, m.h-1, w)
	return append(out, m.footer())
}

// title is a pane's title rule; the focused pane's is highlighted.
func (m *Model) title(text string, p Pane, w int) string {
	st := m.styles.Pane
	mark := "─ "
	if p >= 0 && p == m.focus {
		st = m.styles.Focus
		mark = "▶ "
	}
	s := mark + text + " "
	if n := w - len([]rune(s)); n > 0 {
		s += strings.Repeat("─", n)
	}
	return st.Render(fit(s, w))
}

func (m *Model) psetTitle() string {
	j := m.selected()
	if j == nil {
		return "process sets"
	}
	t := "process sets of " + j.Info.App
	if j.PsetsStale {
		t += " (updating)"
	}
	return t
}

func (m *Model) eventsTitle() string {
	t := "events"
	if m.filter != "" {
		t += " matching “" + m.filter + "”"
	}
	return t
}

func (m *Model) header() []string {
	st := m.st
	left := m.styles.Title.Render("dyntop") + "  DVM " + orDash(st.ID)
	if st.Name != "" {
		left += " (" + st.Name + ")"
	}
	if !m.upAt.IsZero() && st.ID != "" {
		now := m.now
		if m.lost != nil && m.lost.At.Before(now) {
			now = m.lost.At // the uptime stops with the DVM
		}
		left += "  up " + uptime(m.upBase+now.Sub(m.upAt))
	}
	if st.Version != "" {
		left += "  dynrt " + st.Version
	}
	var flags []string
	if m.paused {
		flags = append(flags, m.styles.Warn.Render("PAUSED"))
	}
	if m.cfg.ReadOnly {
		flags = append(flags, "read-only")
	}
	flags = append(flags, clock(m.now.In(m.loc())))
	right := strings.Join(flags, "  ")
	line1 := fit(left, max(m.w-len([]rune(stripped(right)))-1, 0)) + " " + right

	if m.lost != nil {
		msg := fmt.Sprintf("DVM %s stopped at %s", orDash(st.ID), clock(m.lost.At.In(m.loc())))
		if m.cfg.Wait {
			msg += ": waiting for it to come back; q quits"
		}
		if m.lost.Err != nil {
			msg += " (" + m.lost.Err.Error() + ")"
		}
		return []string{line1, m.styles.Bad.Render(fit(msg, m.w))}
	}
	c := st.Count()
	busy := 0
	used := st.Used()
	for _, n := range st.Nodes {
		if used[n.Name] > 0 {
			busy++
		}
	}
	var line2 string
	if m.w >= wide {
		line2 = fmt.Sprintf("slots %s %d/%d  nodes %s %d/%d  jobs %d running %d ended  RCs %d flight %d finalized %d aborted",
			bar(c.Used, c.Slots, 12), c.Used, c.Slots, bar(busy, len(st.Nodes), 6), busy, len(st.Nodes),
			c.JobsLive, c.JobsEnded, c.RCFlight, c.RCFinalized, c.RCAborted)
	} else {
		line2 = fmt.Sprintf("slots %s %d/%d  nodes %s %d/%d  jobs %d run %d end  RCs %d live %d fin %d abt",
			bar(c.Used, c.Slots, 6), c.Used, c.Slots, bar(busy, len(st.Nodes), 4), busy, len(st.Nodes),
			c.JobsLive, c.JobsEnded, c.RCFlight, c.RCFinalized, c.RCAborted)
	}
	if c.NodesSuspect > 0 {
		line2 += m.styles.Warn.Render(fmt.Sprintf("  %d node(s) suspect", c.NodesSuspect))
	}
	if down := len(st.Nodes) - c.NodesUp - c.NodesSuspect; down > 0 {
		line2 += m.styles.Bad.Render(fmt.Sprintf("  %d node(s) down", down))
	}
	return []string{line1, line2}
}

func (m *Model) footer() string {
	switch m.mode {
	case modeFilter:
		return fit("filter: "+m.input.View()+m.styles.Dim.Render("  enter apply · esc clear"), m.w)
	case modeCount:
		verb := "add to"
		if m.reqType == wire.RCSub {
			verb = "remove from"
		}
		return fit(fmt.Sprintf("processes to %s %s: ", verb, jobLabel(m.st, m.reqJob))+m.input.View()+m.styles.Dim.Render("  enter · esc"), m.w)
	case modeConfirm:
		verb := "Add"
		if m.reqType == wire.RCSub {
			verb = "Remove"
		}
		return fit(m.styles.Warn.Render(fmt.Sprintf("%s %d process(es) %s %s? [y/N]", verb, m.reqN, map[bool]string{true: "to", false: "from"}[m.reqType == wire.RCAdd], jobLabel(m.st, m.reqJob))), m.w)
	}
	if m.status == "" && m.detail && !m.showHelp {
		return fit(m.styles.Dim.Render("esc back • ? help • q quit"), m.w)
	}
	if m.status != "" {
		st := m.styles.Good
		if m.statusBad {
			st = m.styles.Bad
		}
		return fit(st.Render(m.status), m.w)
	}
	return fit(m.help.ShortHelpView(m.keys.ShortHelp()), m.w)
}

func (m *Model) helpView() []string {
	out := []string{m.styles.Title.Render("dyntop keys"), ""}
	for _, col := range m.keys.FullHelp() {
		for _, b := range col {
			if !b.Enabled() {
				continue
			}
			out = append(out, fmt.Sprintf("  %-10s %s", b.Help().Key, b.Help().Desc))
		}
	}
	out = append(out, "",
		"The slot map shows every slot of every node in the DVM's slot order (thesis",
		"fig. 7.1); a letter names the job holding it, · is a free slot, + a process",
		"beyond the node's slots. Set marks: M malleable, C reference counted w.r.t.",
		"the change in flight, D delta set; a/i active/inactive, v version, e epoch.",
		"", m.styles.Dim.Render("any key closes this help"))
	if m.cfg.ReadOnly {
		out = append(out, m.styles.Dim.Render("read-only: a and s are disabled"))
	}
	return out
}

// jobLines renders the jobs table.
func (m *Model) jobLines(jobs []*Job, w, rows int) []string {
	withNodes := w >= 50
	appW := 8
	hdr := "  J  ID APP      SIZE STATE     CHANGE"
	if withNodes {
		appW = 12
		hdr = "  J  ID APP          SIZE STATE     NODES  CHANGE"
	}
	out := []string{m.styles.Dim.Render(fit(hdr, w))}
	sel := m.selected()
	first := 0
	if i := slices.Index(jobs, sel); i >= rows-1 {
		first = i - (rows - 2)
	}
	for _, j := range jobs[first:] {
		if len(out) >= rows {
			break
		}
		marker := "  "
		if j == sel {
			marker = "▸ "
		}
		change := ""
		if j.Info.Delta != "" {
			change = shortDelta(j.Info.Delta)
			if rc := m.rc(j.Info.Delta); rc != nil {
				change += " " + rc.Status
			}
		}
		state := j.Info.State
		if !j.Live() && j.Info.Code != 0 {
			state += " " + strconv.Itoa(j.Info.Code)
		}
		nodes := ""
		if withNodes {
			nodes = fmt.Sprintf("%5d  ", len(j.Place))
		}
		line := fmt.Sprintf("%s %3d %-*s %4d %-9s %s%s", m.styles.JobFg(j.Info.ID).Render(string(JobLetter(j.Info.ID))),
			j.Info.ID, appW, trunc(j.Info.App, appW), j.Size(), trunc(state, 9), nodes, change)
		line = marker + line
		switch {
		case j == sel && m.focus == PaneJobs:
			line = m.styles.Selected.Render(fit(line, w))
		case !j.Live():
			line = m.styles.Dim.Render(fit(line, w))
		}
		out = append(out, line)
	}
	if len(jobs) == 0 {
		msg := "no job"
		if m.filter != "" {
			msg = "no job matches the filter"
		}
		out = append(out, m.styles.Dim.Render("  "+msg))
	}
	return out
}

func (m *Model) rc(delta string) *wire.RC {
	if i, ok := m.st.rcs[delta]; ok {
		return &m.st.RCs[i]
	}
	return nil
}

// psetLines renders the set tree of the selected job.
func (m *Model) psetLines(w, rows int) []string {
	j := m.selected()
	if j == nil {
		return nil
	}
	lines := psetview.Lines(j.Tree())
	if len(lines) == 0 {
		return []string{m.styles.Dim.Render("  (no sets known yet)")}
	}
	m.psetSel = min(m.psetSel, len(lines)-1)
	first := 0
	if m.psetSel >= rows {
		first = m.psetSel - rows + 1
	}
	var out []string
	for i, l := range lines[first:] {
		if len(out) >= rows {
			break
		}
		s := l.Node.Set
		name := psetview.ShortName(s.Name)
		flags := l.Node.Marks.Flags()
		if flags == "-" {
			flags = ""
		}
		right := fmt.Sprintf(" %5d %-9s %s", s.Size, psetview.Attrs(s), flags)
		nw := max(w-len([]rune(right)), 8)
		line := fit(l.Prefix+name, nw) + right
		switch {
		case first+i == m.psetSel && m.focus == PanePsets:
			line = m.styles.Selected.Render(fit(line, w))
		case l.Node.Marks.Delta:
			line = m.styles.Warn.Render(fit(line, w))
		case !s.Active:
			line = m.styles.Dim.Render(fit(line, w))
		}
		out = append(out, line)
	}
	return out
}

// steps lists the step times of a change in order, with short names.
func steps(t wire.RCTimes) []struct {
	name string
	at   int64
} {
	return []struct {
		name string
		at   int64
	}{
		{"plc", t.Placed}, {"def", t.Defined}, {"jd", t.JobData}, {"ann", t.Announced}, {"lau", t.Launched},
		{"sta", t.Started}, {"acc", t.Accepted}, {"cnf", t.Confirmed}, {"fin", t.Finalized}, {"enf", t.Enforced},
		{"ext", t.Exited}, {"abt", t.Aborted},
	}
}

// rcStep names the latest step a change has reached ("" before any).
// Steps that happen at the same instant count in their order.
func rcStep(t wire.RCTimes) string {
	long := map[string]string{
		"plc": "placed", "def": "defined", "jd": "job data", "ann": "announced", "lau": "launched",
		"sta": "started", "acc": "accepted", "cnf": "confirmed", "fin": "finalized", "enf": "enforced",
		"ext": "exited", "abt": "aborted",
	}
	name, last := "", int64(0)
	for _, st := range steps(t) {
		if st.at != 0 && st.at >= last {
			name, last = long[st.name], st.at
		}
	}
	return name
}

// rcLine renders one change: who, what, status, total or elapsed time,
// and separately the offset of every step reached from the request.
func (m *Model) rcLine(rc wire.RC, withJob bool) (head, times string) {
	sign := "+"
	if rc.Type == wire.RCSub {
		sign = "-"
	}
	who := shortDelta(rc.Delta)
	if withJob {
		app := rc.Job
		if j := m.st.Job(rc.Job); j != nil && j.Info.App != "" {
			app = j.Info.App
		}
		who += " " + trunc(app, 10)
	}
	stStyle := m.styles.Warn
	switch rc.Status {
	case wire.RCFinalized:
		stStyle = m.styles.Good
	case wire.RCAborted:
		stStyle = m.styles.Bad
	}
	req := rc.Times.Requested
	end := rc.Times.Finalized
	if rc.Status == wire.RCAborted {
		end = rc.Times.Aborted
	}
	var total string
	switch {
	case req == 0:
		total = "-"
	case rcFinal(rc.Status) && end != 0:
		total = span(time.Duration(end - req))
	default:
		total = span(m.now.Sub(time.Unix(0, req))) + "…"
	}
	head = fmt.Sprintf("%s %s %s%d %s %s", who, rc.Type, sign, rc.N, stStyle.Render(fmt.Sprintf("%-9s", rc.Status)), total)
	if rc.Status == wire.RCAborted && rc.Reason != "" {
		head += "  " + m.styles.Bad.Render(rc.Reason)
	}
	if c := rc.Cause; c != nil {
		// A change the runtime made itself: say which ranks were lost.
		head += "  " + m.styles.Bad.Render(c.Kind+" of ranks "+c.Ranks.String())
	}
	var parts []string
	for _, s := range steps(rc.Times) {
		if s.at != 0 && req != 0 {
			parts = append(parts, s.name+" "+span(time.Duration(s.at-req)))
		}
	}
	return head, m.styles.Dim.Render(strings.Join(parts, " "))
}

// rcLines renders the changes, newest first: two lines each (status,
// then step times) when there is room, else one.
func (m *Model) rcLines(w, rows int) []string {
	rcs := m.st.RCsOf("")
	if len(rcs) == 0 {
		return []string{m.styles.Dim.Render("  no resource change yet (a/s request one)")}
	}
	m.rcSel = min(m.rcSel, len(rcs)-1)
	per := 1
	if rows >= 2*min(len(rcs), 3) {
		per = 2
	}
	first := 0
	if (m.rcSel+1)*per > rows {
		first = m.rcSel - rows/per + 1
	}
	var out []string
	for i, rc := range rcs[first:] {
		if len(out)+per > rows {
			break
		}
		head, times := m.rcLine(rc, true)
		if first+i == m.rcSel && m.focus == PaneRCs {
			head = m.styles.Selected.Render(fit(ansi.Strip(head), w))
		}
		if per == 2 {
			out = append(out, head, "    "+times)
		} else {
			out = append(out, head+"  "+times)
		}
	}
	return out
}

// eventText renders one event of the log.
func (m *Model) eventText(ev wire.Event) string {
	app := ev.Job
	if j := m.st.Job(ev.Job); j != nil && j.Info.App != "" {
		app = j.Info.App
	}
	var what string
	switch ev.Kind {
	case wire.EvJobState:
		what = "job " + ev.State
		if ev.Code != 0 {
			what += " (code " + strconv.Itoa(ev.Code) + ")"
		}
		if ev.Msg != "" {
			what += ": " + ev.Msg
		}
	case wire.EvProcState:
		what = "ranks " + psetview.Short(ev.Ranks, 24) + " " + ev.State
		if ev.Node != "" {
			what += " on " + ev.Node
		}
		if ev.Code != 0 {
			what += " code " + strconv.Itoa(ev.Code)
		}
		if ev.Msg != "" {
			what += ": " + ev.Msg
		}
	case wire.EvPsetDef:
		if ev.Pset != nil {
			what = fmt.Sprintf("%s v%d size %d", ev.Pset.Name, ev.Pset.Version, ev.Pset.Size)
		}
	case wire.EvPsetDel:
		if ev.Pset != nil {
			what = ev.Pset.Name + " deleted"
		}
	case wire.EvRCState, wire.EvRCUpdate:
		if ev.RC != nil {
			what = fmt.Sprintf("%s %s %d %s", shortDelta(ev.RC.Delta), ev.RC.Type, ev.RC.N, ev.RC.Status)
			// The master publishes every step of a change, several in one
			// status (ANNOUNCED, then launched, then started): name the step
			// so those lines do not read as the same event twice.
			step := ev.Msg
			if step == "" {
				step = rcStep(ev.RC.Times)
				if step == "accepted" && ev.RC.Accepts > 1 {
					step += fmt.Sprintf(" ×%d", ev.RC.Accepts)
				}
			}
			if step != "" && !strings.EqualFold(step, ev.RC.Status) {
				what += " (" + step + ")"
			}
			if ev.RC.Reason != "" && ev.RC.Status == wire.RCAborted {
				what += ": " + ev.RC.Reason
			}
			if c := ev.RC.Cause; c != nil && ev.RC.Status == wire.RCAnnounced {
				what += " [" + c.Kind + ": " + strings.Join(c.Why, "; ") + "]"
			}
		}
	case wire.EvNodeUp, wire.EvNodeSuspect, wire.EvNodeDown, wire.EvNodeJoining, wire.EvNodeAdded, wire.EvNodeLeaving, wire.EvNodeRemoved:
		app = ev.Node
		what = strings.TrimPrefix(ev.Kind, "node.")
		if ev.Msg != "" {
			what += ": " + ev.Msg
		}
	default:
		what = ev.Msg
	}
	return fmt.Sprintf("%s %-10s %-10s %s", m.stamp(ev.Time), ev.Kind, trunc(app, 10), what)
}

func (m *Model) eventLines(w, rows int) []string {
	if rows <= 0 {
		return nil
	}
	var picked []string
	skip := m.logBack
	for i := len(m.st.Log) - 1; i >= 0 && len(picked) < rows; i-- {
		line := m.eventText(m.st.Log[i])
		if !m.matches(line) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		picked = append(picked, line)
	}
	if len(picked) == 0 {
		return []string{m.styles.Dim.Render("  no event yet")}
	}
	slices.Reverse(picked)
	for i, l := range picked {
		if k := strings.Index(l, " rc.state "); k >= 0 {
			picked[i] = m.styles.Warn.Render(fit(l, w))
		}
	}
	return picked
}

func (m *Model) detailView() []string {
	j := m.selected()
	in := j.Info
	w := m.w
	out := []string{
		m.title(fmt.Sprintf("job %s (%s)", in.App, in.Job), -1, w),
		fmt.Sprintf("state %s  processes %d  next rank %d  started %s  job letter %s", in.State, j.Size(), in.NextRank,
			m.stamp(in.Started), m.styles.JobFg(in.ID).Render(string(JobLetter(in.ID)))),
		"command " + strings.Join(in.Argv, " "),
		"",
		m.styles.Bold.Render("placement"),
	}
	for _, n := range m.st.Nodes {
		if rr := j.Place[n.Name]; len(rr) > 0 {
			out = append(out, fmt.Sprintf("  %-10s %4d  %s", n.Name, rr.Count(), psetview.Short(rr, w-20)))
		}
	}
	if len(j.Place) == 0 {
		out = append(out, m.styles.Dim.Render("  no live process"))
	}
	delta := ""
	if in.Delta != "" {
		delta = " (C w.r.t. " + in.Delta + ")"
	}
	out = append(out, "", m.styles.Bold.Render("process sets"+delta))
	for _, l := range psetview.Lines(j.Tree()) {
		s := l.Node.Set
		out = append(out, fmt.Sprintf("  %s  %d  %s  %s  %s", l.Prefix+s.Name, s.Size, psetview.Attrs(s), l.Node.Marks.Flags(), psetview.Short(s.Members, 40)))
	}
	out = append(out, "", m.styles.Bold.Render("resource changes"))
	rcs := m.st.RCsOf(in.Job)
	for _, rc := range rcs {
		head, times := m.rcLine(rc, false)
		out = append(out, "  "+head, "      "+times)
	}
	if len(rcs) == 0 {
		out = append(out, m.styles.Dim.Render("  none"))
	}
	out = block(out, m.h-1, w)
	return append(out, m.footer())
}

// slotCell is one cell of the slot map; job is nil for a free slot.
type slotCell struct {
	job  *Job
	rank uint32
}

// slotCells lays the live processes out on each node's slots. With the
// master's slot map a process sits at its own slot (its global index
// minus the node's first global slot; slots are numbered in node order).
// Processes the map does not hold yet (started since it was fetched, or
// oversubscribed) take the node's free cells, then cells past its slots.
// An older master sends no map: processes are then laid out by job, then
// rank, which is exact per node but not within it.
func (s *State) slotCells() [][]slotCell {
	nodes := s.Nodes
	cells := make([][]slotCell, len(nodes))
	var placed map[*Job]map[uint32]bool
	if len(s.Slots) > 0 {
		placed = map[*Job]map[uint32]bool{}
		at := make(map[uint32]int, len(nodes)) // node index → position in nodes
		base := make([]int, len(nodes))
		first := 0
		for i, n := range nodes {
			at[n.Index], base[i] = i, first
			first += int(n.Slots)
			cells[i] = make([]slotCell, n.Slots)
		}
		for _, su := range s.Slots {
			i, ok := at[su.Node]
			j := s.jobs[su.Job]
			if su.Slot < 0 || !ok || j == nil {
				continue
			}
			pos := int(su.Slot) - base[i]
			// the events may have ended the process since the map was taken
			if pos < 0 || pos >= len(cells[i]) || cells[i][pos].job != nil || !j.Place[nodes[i].Name].Contains(su.Rank) {
				continue
			}
			cells[i][pos] = slotCell{j, su.Rank}
			if placed[j] == nil {
				placed[j] = map[uint32]bool{}
			}
			placed[j][su.Rank] = true
		}
	}
	for i, n := range nodes {
		next := 0
		for _, j := range s.Jobs {
			for r := range j.Place[n.Name].All() {
				if placed[j][r] {
					continue
				}
				for next < len(cells[i]) && cells[i][next].job != nil {
					next++
				}
				if next < len(cells[i]) {
					cells[i][next] = slotCell{j, r}
				} else {
					cells[i] = append(cells[i], slotCell{j, r})
				}
				next++
			}
		}
	}
	return cells
}

// slotLines renders the node × slot map in at most rows lines.
//
// Each slot shows the job holding it (its letter, coloured by job) and,
// when every node fits on one line that way, the rank. See slotCells for
// where each process goes.
func (m *Model) slotLines(w, rows int) []string {
	nodes := m.st.Nodes
	if len(nodes) == 0 {
		return []string{m.styles.Dim.Render("  no node known yet")}
	}
	cells := m.st.slotCells()
	used := make([]int, len(nodes))
	nameW := 0
	maxSlots := 0
	for i, n := range nodes {
		nameW = max(nameW, len(n.Name))
		for _, c := range cells[i] {
			if c.job != nil {
				used[i]++
			}
		}
		maxSlots = max(maxSlots, int(n.Slots), len(cells[i]))
	}
	// Wide cells with ranks, when they fit.
	cw := 2
	for _, cs := range cells {
		for _, c := range cs {
			if c.job == nil {
				continue
			}
			cw = max(cw, len(strconv.FormatUint(uint64(c.rank), 10))+2)
		}
	}
	free := m.styles.Free.Render
	renderRow := func(i int, wideCells bool, from, to int) string {
		n := nodes[i]
		var b strings.Builder
		for s := from; s < to; {
			if s >= len(cells[i]) || cells[i][s].job == nil {
				txt := "·"
				if wideCells {
					txt = fit("·", cw)
				}
				b.WriteString(free(txt))
				s++
				continue
			}
			// a run of cells of one job in one Render call
			j := cells[i][s].job
			var run strings.Builder
			e := s
			for ; e < to && e < len(cells[i]) && cells[i][e].job == j; e++ {
				over := e >= int(n.Slots)
				switch {
				case wideCells:
					txt := string(JobLetter(j.Info.ID)) + strconv.FormatUint(uint64(cells[i][e].rank), 10)
					if over {
						txt = "+" + txt[1:]
					}
					run.WriteString(fit(txt, cw))
				case over:
					run.WriteByte('+')
				default:
					run.WriteByte(JobLetter(j.Info.ID))
				}
			}
			b.WriteString(m.styles.Job(j.Info.ID).Render(run.String()))
			s = e
		}
		return b.String()
	}
	name := func(i int) string {
		n := nodes[i]
		s := fit(n.Name, nameW)
		switch n.State {
		case wire.NodeDown:
			return m.styles.Bad.Render(s)
		case wire.NodeSuspect, wire.NodeLeaving, wire.NodeStarting:
			return m.styles.Warn.Render(s)
		}
		return s
	}
	// A node that is joining or leaving the DVM says so after its count
	// (colour alone does not show on every terminal).
	note := func(i int) string {
		switch st := nodes[i].State; st {
		case wire.NodeLeaving, wire.NodeStarting:
			return " " + st
		}
		return ""
	}
	var out []string
	if nameW+3+maxSlots*cw <= w && len(nodes) <= rows {
		for i, n := range nodes {
			out = append(out, fmt.Sprintf("%s │%s│ %d/%d%s", name(i), renderRow(i, true, 0, max(int(n.Slots), len(cells[i]))), used[i], n.Slots, note(i)))
		}
		return out
	}
	// Compact: one character per slot, several nodes per line.
	blockW := nameW + 1 + maxSlots
	if blockW > w { // a node wider than the screen: wrap its slots
		per := max(w-nameW-1, 1)
		for i, n := range nodes {
			total := max(int(n.Slots), len(cells[i]))
			for s := 0; s < total; s += per {
				label := strings.Repeat(" ", nameW)
				if s == 0 {
					label = name(i)
				}
				out = append(out, label+" "+renderRow(i, false, s, min(s+per, total)))
			}
		}
	} else {
		perLine := max(1, (w+2)/(blockW+2))
		for i := 0; i < len(nodes); i += perLine {
			var parts []string
			for k := i; k < min(i+perLine, len(nodes)); k++ {
				total := max(int(nodes[k].Slots), len(cells[k]))
				parts = append(parts, name(k)+" "+fit(renderRow(k, false, 0, total), maxSlots))
			}
			out = append(out, strings.Join(parts, "  "))
		}
	}
	if len(out) > rows {
		hidden := len(out) - rows + 1
		out = append(out[:rows-1], m.styles.Dim.Render(fmt.Sprintf("  … %d more line(s) of nodes; a taller terminal shows them", hidden)))
	}
	return out
}

func (m *Model) loc() *time.Location {
	if m.cfg.Location != nil {
		return m.cfg.Location
	}
	return time.Local
}

func (m *Model) stamp(ns int64) string {
	if ns == 0 {
		return "--:--:--.---"
	}
	return time.Unix(0, ns).In(m.loc()).Format("15:04:05.000")
}

func shortDelta(d string) string {
	if d == "" {
		return "-"
	}
	return psetview.ShortName(d)
}

func trunc(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stripped removes styling for width computations.
func stripped(s string) string { return ansi.Strip(s) }
