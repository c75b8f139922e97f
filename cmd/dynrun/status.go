package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// statusJSON is the document `dynrun dvm status --json` prints. Its field
// names are part of dynrun's interface (docs/dynrun.md): add, never rename.
type statusJSON struct {
	ID      string     `json:"id"`
	Name    string     `json:"name,omitempty"`
	PID     int        `json:"pid"`
	Version string     `json:"version,omitempty"`
	Started time.Time  `json:"started"`
	Uptime  float64    `json:"uptime_s"`
	Slots   int        `json:"slots"`
	Used    int        `json:"used"`
	Nodes   []nodeJSON `json:"nodes"`
	Jobs    []jobJSON  `json:"jobs"`
	// Launcher and NodeLog: how daemons start, and the latest nodes
	// that joined or left the running DVM (dvm grow/shrink).
	Launcher string `json:"launcher,omitempty"`
	// LauncherInfo: how the launcher was chosen and on what (free text).
	LauncherInfo string          `json:"launcher_info,omitempty"`
	NodeLog      []nodeEventJSON `json:"node_log,omitempty"`
	// Tree: the tree of daemons (dvm start --tree-radix) and its use.
	Tree *treeJSON `json:"tree,omitempty"`
}

type treeJSON struct {
	Radix   uint32 `json:"radix"`
	Relays  uint64 `json:"relays"`  // relays sent to the heads of parts
	Resends uint64 `json:"resends"` // sent again directly to a daemon the tree did not reach
	Fences  uint64 `json:"fences"`  // fence instances whose collected data went down the tree
	Up      uint64 `json:"up"`      // fence requests gathered up the tree that reached the master
	Entries uint64 `json:"entries"` // the daemons' entries they carried
	Events  uint64 `json:"events"`  // bus events sent down the tree to the daemons' subscribers
}

type nodeEventJSON struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // node.added, node.leaving, node.removed, node.up (a shrink gave up)
	Node  string    `json:"node"`
	Msg   string    `json:"msg"`
}

type nodeJSON struct {
	Name  string `json:"name"`
	Index uint32 `json:"index"`
	Host  string `json:"host,omitempty"`
	Slots uint32 `json:"slots"`
	Used  uint32 `json:"used"`
	PID   int    `json:"pid,omitempty"`
	Addr  string `json:"addr,omitempty"`
	State string `json:"state"`
}

type jobJSON struct {
	ID        uint32          `json:"id"`
	Job       string          `json:"job"`
	App       string          `json:"app"`
	State     string          `json:"state"`
	Size      uint32          `json:"size"`
	Argv      []string        `json:"argv"`
	Code      int             `json:"code"`
	Started   time.Time       `json:"started"`
	Ended     *time.Time      `json:"ended,omitempty"`
	Placement []placementJSON `json:"placement,omitempty"`
	OnFailure string          `json:"on_failure,omitempty"` // failure policy: abort, continue or shrink
}

type placementJSON struct {
	Node  string `json:"node"`
	Ranks string `json:"ranks"` // compact form, e.g. "0-7,9"
}

func unixNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// toStatusJSON converts the master's snapshot; name comes from the
// rendezvous file (the master's state does not carry it).
func toStatusJSON(st wire.DVMState, name string) statusJSON {
	out := statusJSON{
		ID: st.ID, Name: name, PID: st.PID, Version: st.Version, LauncherInfo: st.LauncherInfo,
		Started: unixNS(st.Started), Uptime: time.Duration(st.Uptime).Seconds(),
		Nodes: []nodeJSON{}, Jobs: []jobJSON{}, Launcher: st.Launcher,
	}
	if t := st.Tree; t != nil {
		out.Tree = &treeJSON{Radix: t.Radix, Relays: t.Relays, Resends: t.Resends, Fences: t.Fences, Up: t.Up, Entries: t.UpParts, Events: t.Events}
	}
	for _, ev := range st.NodeLog {
		out.NodeLog = append(out.NodeLog, nodeEventJSON{Time: unixNS(ev.Time), Event: ev.Kind, Node: ev.Node, Msg: ev.Msg})
	}
	for _, n := range st.Nodes {
		out.Slots += int(n.Slots)
		out.Used += int(n.Used)
		out.Nodes = append(out.Nodes, nodeJSON{Name: n.Name, Index: n.Index, Host: n.Host, Slots: n.Slots, Used: n.Used, PID: n.PID, Addr: n.Addr, State: n.State})
	}
	for _, j := range st.Jobs {
		jj := jobJSON{ID: j.ID, Job: j.Job, App: j.App, State: j.State, Size: j.Size, Argv: j.Argv, Code: j.Code, Started: unixNS(j.Started), OnFailure: j.OnFailure}
		if jj.Argv == nil {
			jj.Argv = []string{}
		}
		if j.Ended != 0 {
			t := unixNS(j.Ended)
			jj.Ended = &t
		}
		for _, p := range j.Placement {
			jj.Placement = append(jj.Placement, placementJSON{Node: p.Node, Ranks: p.Ranks.String()})
		}
		out.Jobs = append(out.Jobs, jj)
	}
	return out
}

func writeStatusJSON(w io.Writer, s statusJSON) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

const barWidth = 20

// bar draws used/total as a fixed-width gauge: '#' used, '.' free, and a
// trailing '+' when the node is oversubscribed.
func bar(used, total uint32) string {
	n := 0
	if total > 0 {
		n = int((uint64(min(used, total))*barWidth + uint64(total)/2) / uint64(total))
	}
	if used > 0 && n == 0 {
		n = 1 // a busy node never looks idle
	}
	s := "[" + strings.Repeat("#", n) + strings.Repeat(".", barWidth-n) + "]"
	if used > total {
		s += "+"
	}
	return s
}

// writeStatus prints the human form of `dynrun dvm status`.
func writeStatus(w io.Writer, s statusJSON) error {
	title := "DVM " + s.ID
	if s.Name != "" {
		title += " (" + s.Name + ")"
	}
	up := time.Duration(s.Uptime * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(w, "%s  master pid %d  up %s  %d nodes  %d/%d slots used", title, s.PID, up, len(s.Nodes), s.Used, s.Slots)
	if s.Version != "" {
		fmt.Fprintf(w, "  %s", s.Version)
	}
	fmt.Fprintln(w)
	if s.LauncherInfo != "" {
		fmt.Fprintf(w, "launcher %s\n", s.LauncherInfo)
	}
	if t := s.Tree; t != nil {
		fmt.Fprintf(w, "tree of daemons: radix %d, %d relays (%d fences' data, %d events), %d sent again directly; %d fence requests gathered up it (%d daemons' entries)\n",
			t.Radix, t.Relays, t.Fences, t.Events, t.Resends, t.Up, t.Entries)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOST\tUSED\tLOAD\tPID\tSTATE")
	for _, n := range s.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%d\t%s\n", n.Name, dash(n.Host), n.Used, n.Slots, bar(n.Used, n.Slots), n.PID, n.State)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.NodeLog) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "node changes:")
		now := s.Started.Add(time.Duration(s.Uptime * float64(time.Second))) // by the master's clock
		for _, ev := range s.NodeLog {
			ago := now.Sub(ev.Time).Round(time.Second)
			fmt.Fprintf(w, "  %8s ago  %-13s %s\n", ago, ev.Event, ev.Msg)
		}
	}
	fmt.Fprintln(w)
	if len(s.Jobs) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAMESPACE\tAPP\tSTATE\tON-FAILURE\tPROCS\tNODES\tCOMMAND")
	for _, j := range s.Jobs {
		nodes := make([]string, len(j.Placement))
		for i, p := range j.Placement {
			nodes[i] = p.Node
		}
		state := j.State
		if j.Ended != nil && j.Code != 0 {
			state += fmt.Sprintf(" (%d)", j.Code)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Job, j.App, state, dash(j.OnFailure), j.Size, dash(strings.Join(nodes, ",")), clip(strings.Join(j.Argv, " "), 40))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
