package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// step is one timestamp of an RC record, under the name dynrc prints and
// puts in JSON. Names follow lib/rc's steps where they mean the same.
type step struct {
	name string
	at   func(*wire.RCTimes) int64
}

// steps lists every timestamp in the order the runtime normally reaches
// them; it is also the tie-break when two steps share a timestamp.
var steps = []step{
	{"requested", func(t *wire.RCTimes) int64 { return t.Requested }},
	{"placed", func(t *wire.RCTimes) int64 { return t.Placed }},
	{"delta_defined", func(t *wire.RCTimes) int64 { return t.Defined }},
	{"job_data_pushed", func(t *wire.RCTimes) int64 { return t.JobData }},
	{"announced", func(t *wire.RCTimes) int64 { return t.Announced }},
	{"launched", func(t *wire.RCTimes) int64 { return t.Launched }},
	{"all_started", func(t *wire.RCTimes) int64 { return t.Started }},
	{"accept_published", func(t *wire.RCTimes) int64 { return t.Accepted }},
	{"confirmed", func(t *wire.RCTimes) int64 { return t.Confirmed }},
	{"finalized", func(t *wire.RCTimes) int64 { return t.Finalized }},
	{"enforced", func(t *wire.RCTimes) int64 { return t.Enforced }},
	{"all_exited", func(t *wire.RCTimes) int64 { return t.Exited }},
	{"aborted", func(t *wire.RCTimes) int64 { return t.Aborted }},
}

// stepTime is one reached step with the time since the previous reached
// step and since the request.
type stepTime struct {
	Name         string
	At           time.Time
	SincePrev    time.Duration
	SinceRequest time.Duration
}

// stepTimes lists the reached steps of rc in time order (ties in the order
// of steps). Durations from the request are 0 when the request time is
// missing.
func stepTimes(rc *wire.RC) []stepTime {
	var out []stepTime
	for _, s := range steps {
		if ns := s.at(&rc.Times); ns != 0 {
			out = append(out, stepTime{Name: s.name, At: time.Unix(0, ns)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	for i := range out {
		if i > 0 {
			out[i].SincePrev = out[i].At.Sub(out[i-1].At)
		}
		if rc.Times.Requested != 0 {
			out[i].SinceRequest = out[i].At.Sub(time.Unix(0, rc.Times.Requested))
		}
	}
	return out
}

// endTime is when a change was over: aborted, or finalized and (for a SUB)
// every removed process gone. Zero while it is not.
func endTime(rc *wire.RC) int64 {
	switch {
	case rc.Status == wire.RCAborted:
		return rc.Times.Aborted
	case rc.Status != wire.RCFinalized:
		return 0
	case rc.Type == wire.RCSub || rc.Type == wire.RCReplace:
		return rc.Times.Exited
	}
	return rc.Times.Finalized
}

// total is the time from the request to endTime (0 while not over).
func total(rc *wire.RC) time.Duration {
	end := endTime(rc)
	if end == 0 || rc.Times.Requested == 0 {
		return 0
	}
	return time.Duration(end - rc.Times.Requested)
}

// rcJSON is the document --json prints for one change. Its field names are
// part of dynrc's interface (docs/rc.md): add, never rename.
type rcJSON struct {
	Delta       string             `json:"delta"`
	Job         string             `json:"job"`
	Type        string             `json:"type"`
	Status      string             `json:"status"`
	N           uint32             `json:"n"`
	Ranks       string             `json:"ranks"`
	Replaced    string             `json:"replaced,omitempty"`     // REPLACE: the processes replaced
	ReplacedSet string             `json:"replaced_set,omitempty"` // REPLACE: their set
	Bound       []string           `json:"bound"`
	BoundRefs   []setJSON          `json:"bound_versions,omitempty"` // bound sets with the version whose members accept
	Requester   string             `json:"requester"`
	RequesterID string             `json:"requester_id,omitempty"`
	Placement   []placementJSON    `json:"placement"`
	NewSet      *setJSON           `json:"new_set,omitempty"`
	Accepts     uint32             `json:"accepts"`
	Reason      string             `json:"reason,omitempty"`
	Settled     bool               `json:"settled"`         // final, and every process and slot of the change released
	Ended       []endJSON          `json:"ended,omitempty"` // the delta's processes that have ended
	Cause       *causeJSON         `json:"cause,omitempty"` // why the runtime made the change itself (requester "runtime")
	Steps       []stepJSON         `json:"steps"`
	ElapsedMS   map[string]float64 `json:"elapsed_ms"` // step name → ms since the request
	TotalMS     *float64           `json:"total_ms,omitempty"`
}

// causeJSON is a change's cause: kind "failure", the lost ranks, and one
// line per rank on how it was lost.
type causeJSON struct {
	Kind  string   `json:"kind"`
	Ranks string   `json:"ranks"`
	Why   []string `json:"why"`
}

type endJSON struct {
	Rank   uint32 `json:"rank"`
	Node   string `json:"node"`
	State  string `json:"state"`
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
}

type placementJSON struct {
	Node  string `json:"node"`
	Ranks string `json:"ranks"`
}

type setJSON struct {
	Name    string `json:"name"`
	Version uint32 `json:"version"`
}

type stepJSON struct {
	Step           string    `json:"step"`
	At             time.Time `json:"at"`
	SincePrevMS    float64   `json:"since_prev_ms"`
	SinceRequestMS float64   `json:"since_request_ms"`
}

// ms renders d in milliseconds with three decimals: microseconds are as
// fine as the steps of a change are worth comparing.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func toJSON(rc *wire.RC) rcJSON {
	out := rcJSON{
		Delta: rc.Delta, Job: rc.Job, Type: rc.Type, Status: rc.Status, N: rc.N, Ranks: rc.Ranks.String(),
		Bound: append([]string{}, rc.Bound...), Requester: rc.Requester, RequesterID: rc.RequesterID,
		Placement: []placementJSON{}, Accepts: rc.Accepts, Reason: rc.Reason, Settled: rc.Settled,
		Steps: []stepJSON{}, ElapsedMS: map[string]float64{},
		Replaced: rc.Out.String(), ReplacedSet: rc.OutSet,
	}
	if out.Status == "" {
		out.Status = wire.RCNull
	}
	for _, p := range rc.Placement {
		out.Placement = append(out.Placement, placementJSON{Node: p.Node, Ranks: p.Ranks.String()})
	}
	for _, p := range rc.Ended {
		out.Ended = append(out.Ended, endJSON{Rank: p.Rank, Node: p.Node, State: p.State, Code: p.Code, Signal: p.Signal})
	}
	for _, b := range rc.BoundRefs {
		out.BoundRefs = append(out.BoundRefs, setJSON{Name: b.Name, Version: b.Version})
	}
	if rc.NewSet != nil {
		out.NewSet = &setJSON{Name: rc.NewSet.Name, Version: rc.NewSet.Version}
	}
	if c := rc.Cause; c != nil {
		out.Cause = &causeJSON{Kind: c.Kind, Ranks: c.Ranks.String(), Why: append([]string{}, c.Why...)}
	}
	for _, s := range stepTimes(rc) {
		out.Steps = append(out.Steps, stepJSON{Step: s.Name, At: s.At.UTC(), SincePrevMS: ms(s.SincePrev), SinceRequestMS: ms(s.SinceRequest)})
		out.ElapsedMS[s.Name] = ms(s.SinceRequest)
	}
	if d := total(rc); d > 0 {
		v := ms(d)
		out.TotalMS = &v
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fmtMS prints a duration in milliseconds with microsecond resolution, the
// unit of the thesis's tables.
func fmtMS(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// what describes the change in a few words: "ADD 2 (ranks 28-29)",
// "REPLACE 2 (ranks 1-2 by 28-29)".
func what(rc *wire.RC) string {
	s := fmt.Sprintf("%s %d", rc.Type, rc.N)
	switch {
	case len(rc.Out) > 0 && len(rc.Ranks) > 0:
		s += " (ranks " + rc.Out.String() + " by " + rc.Ranks.String() + ")"
	case len(rc.Ranks) > 0:
		s += " (ranks " + rc.Ranks.String() + ")"
	}
	return s
}

func status(rc *wire.RC) string {
	if rc.Status == "" {
		return wire.RCNull
	}
	return rc.Status
}

// summary is the one line add, sub, wait and cancel print.
func summary(rc *wire.RC) string {
	name := rc.Delta
	if name == "" { // queued: the change is numbered when its turn comes
		name = "job " + rc.Job
	}
	s := name + "  " + what(rc) + "  " + status(rc)
	if rc.Status == wire.RCNull || rc.Status == "" {
		s += " (queued)"
	}
	if d := total(rc); d > 0 {
		s += " after " + fmtMS(d)
	}
	if rc.Reason != "" {
		s += ": " + rc.Reason
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeShow prints one change as a readable report: the record, then every
// reached step with the time since the previous step and since the
// request. Times of day are shown in loc.
func writeShow(w io.Writer, rc *wire.RC, loc *time.Location) error {
	fmt.Fprintf(w, "resource change %s\n", rc.Delta)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "  %s\t%s\n", k, v) }
	row("job", rc.Job)
	row("type", rc.Type)
	st := status(rc)
	switch {
	case final(rc.Status) && !rc.Settled && rc.Type == wire.RCSub:
		st += " (removed processes still exiting)"
	case rc.Status == wire.RCFinalized && !rc.Settled && rc.Type == wire.RCReplace:
		st += " (replaced processes still exiting)"
	case final(rc.Status) && !rc.Settled:
		st += " (being cleaned up)"
	case rc.Status == wire.RCNull || rc.Status == "":
		st += " (queued, or phase 1 running)"
	}
	row("status", st)
	row("processes", fmt.Sprintf("%d", rc.N))
	row("ranks", dash(rc.Ranks.String()))
	if rc.Type == wire.RCReplace {
		row("replaced", dash(rc.Out.String())+" ("+dash(rc.OutSet)+")")
	}
	bound := rc.Bound
	if len(rc.BoundRefs) > 0 {
		bound = nil
		for _, b := range rc.BoundRefs {
			bound = append(bound, fmt.Sprintf("%s version %d", b.Name, b.Version))
		}
	}
	row("bound sets", dash(strings.Join(bound, ", ")))
	if rc.NewSet != nil {
		row("new set", fmt.Sprintf("%s version %d", rc.NewSet.Name, rc.NewSet.Version))
	}
	if rc.Type == wire.RCSub || rc.Accepts > 0 {
		row("accepts", fmt.Sprintf("%d of %d", rc.Accepts, max(len(rc.Bound), 1)))
	}
	by := dash(rc.Requester)
	if rc.RequesterID != "" {
		by += " (" + rc.RequesterID + ")"
	}
	row("requester", by)
	if c := rc.Cause; c != nil {
		row("cause", fmt.Sprintf("%s of ranks %s: %s", c.Kind, c.Ranks, strings.Join(c.Why, "; ")))
	}
	var pl []string
	for _, p := range rc.Placement {
		pl = append(pl, p.Node+": "+p.Ranks.String())
	}
	row("placement", dash(strings.Join(pl, "; ")))
	if len(rc.Ended) > 0 {
		var ends []string
		for _, p := range rc.Ended {
			ends = append(ends, endText(p))
		}
		row("ended", strings.Join(ends, "; "))
	}
	if rc.Reason != "" {
		row("reason", rc.Reason)
	}
	if d := total(rc); d > 0 {
		row("total", fmtMS(d))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	rows := stepTimes(rc)
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "\nno step recorded")
		return err
	}
	fmt.Fprintf(w, "\nsteps (%s)\n", rows[0].At.In(loc).Format("2006-01-02 MST"))
	width := len("STEP")
	for _, s := range rows {
		width = max(width, len(s.Name))
	}
	fmt.Fprintf(w, "  %-*s  %-15s  %14s  %14s\n", width, "STEP", "TIME", "SINCE PREVIOUS", "SINCE REQUEST")
	for i, s := range rows {
		prev, req := fmtMS(s.SincePrev), fmtMS(s.SinceRequest)
		if i == 0 {
			prev = "-"
		}
		if rc.Times.Requested == 0 {
			req = "-"
		}
		if _, err := fmt.Fprintf(w, "  %-*s  %-15s  %14s  %14s\n", width, s.Name, s.At.In(loc).Format("15:04:05.000000"), prev, req); err != nil {
			return err
		}
	}
	return nil
}

// endText says how a process of a change ended: "rank 5 on node0 exited
// with code 5".
func endText(p wire.ProcInfo) string {
	how := "exited with code " + strconv.Itoa(p.Code)
	switch {
	case p.Signal != 0:
		how = "killed by signal " + strconv.Itoa(p.Signal) + " (" + syscall.Signal(p.Signal).String() + ")"
	case p.State == wire.ProcStateFailed:
		how = "could not start (code " + strconv.Itoa(p.Code) + ")"
	case p.State == wire.ProcStateKilled:
		how = "was stopped by the runtime"
	}
	return fmt.Sprintf("rank %d on %s %s", p.Rank, dash(p.Node), how)
}

// writeList prints one line per change.
func writeList(w io.Writer, rcs []wire.RC) error {
	if len(rcs) == 0 {
		_, err := fmt.Fprintln(w, "no resource changes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELTA\tJOB\tTYPE\tN\tRANKS\tSTATUS\tBY\tTOTAL")
	for i := range rcs {
		rc := &rcs[i]
		tot := "-"
		if d := total(rc); d > 0 {
			tot = fmtMS(d)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", rc.Delta, rc.Job, rc.Type, rc.N, dash(rc.Ranks.String()), status(rc), byText(rc), tot)
	}
	return tw.Flush()
}

// byText is the list's BY column: the requester, and the cause of a
// change the runtime made itself ("runtime (failure)").
func byText(rc *wire.RC) string {
	if rc.Cause != nil {
		return dash(rc.Requester) + " (" + rc.Cause.Kind + ")"
	}
	return dash(rc.Requester)
}
