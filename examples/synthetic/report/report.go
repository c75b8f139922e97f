// Package report holds the JSON lines written by examples/synthetic and the
// pure logic built on them: reading a run back, the summary tables in the
// shape of thesis tables 8.2/8.3 and figures 8.2/8.3, and the series that
// scripts/rcplot draws. It does no I/O beyond the readers and writers it is
// handed.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Line kinds.
const (
	KindIter   = "iter" // one iteration of the main loop
	KindChange = "rc"   // one resource change, written once it has ended
	KindEnd    = "end"  // the run's end: parameters and the work result
)

// Iter is one iteration as the root saw it. Times are milliseconds of the
// root's wall clock; the phase fields are set only in the iterations in
// which that phase ran.
type Iter struct {
	Kind        string  `json:"kind"`
	Iter        int     `json:"iter"`
	Procs       int     `json:"procs"`        // processes that did this iteration's work
	WorkMS      float64 `json:"work_ms"`      // the work step: the root's work and the allreduce of the results (ends with the slowest process)
	OwnWorkMS   float64 `json:"own_work_ms"`  // the root's own share of the work
	RebalanceMS float64 `json:"rebalance_ms"` // recomputing the partition bounds
	SyncMS      float64 `json:"sync_ms"`      // the barrier before the work
	RCMS        float64 `json:"rc_ms"`        // the whole resource-change step (phases 1–3 and the new communicator)
	QueryMS     float64 `json:"query_ms,omitempty"`
	Phase1MS    float64 `json:"phase1_ms,omitempty"` // runtime: request → ANNOUNCED, from the record
	Phase2MS    float64 `json:"phase2_ms,omitempty"` // the root's set operation
	Phase3MS    float64 `json:"phase3_ms,omitempty"` // accept over the communicator (this iteration's call)
	CommMS      float64 `json:"comm_ms,omitempty"`   // building the communicator over the new set
	Delta       string  `json:"delta,omitempty"`     // the change in flight in this iteration's step
	RCType      string  `json:"rc_type,omitempty"`
	RCN         int     `json:"rc_n,omitempty"`
	RCStatus    string  `json:"rc_status,omitempty"` // after this iteration's step: PENDING shows a change not yet confirmed
	Count       int64   `json:"count"`               // the work result (sum over all processes)
}

// Pending reports whether the iteration ended with a change still pending.
func (it Iter) Pending() bool { return it.RCStatus == wire.RCPending }

// Change is one resource change: the runtime's step times (milliseconds
// since the request, from the master's record; 0 when the step does not
// apply) and what it cost the application (root's clock).
type Change struct {
	Kind      string `json:"kind"`
	Delta     string `json:"delta"`
	Type      string `json:"type"`   // ADD or SUB
	Status    string `json:"status"` // FINALIZED or ABORTED
	Requester string `json:"requester,omitempty"`
	N         int    `json:"n"`    // n_delta
	From      int    `json:"from"` // processes before (n_start of the figures)
	To        int    `json:"to"`   // processes after (n_dest)
	Blocking  bool   `json:"blocking"`
	Mode      string `json:"mode,omitempty"`

	AnnouncedMS float64 `json:"announced_ms"`
	StartedMS   float64 `json:"started_ms,omitempty"`
	AcceptedMS  float64 `json:"accepted_ms,omitempty"`
	ConfirmedMS float64 `json:"confirmed_ms,omitempty"`
	FinalizedMS float64 `json:"finalized_ms,omitempty"`
	ExitedMS    float64 `json:"exited_ms,omitempty"`

	Phase1MS     float64 `json:"phase1_ms"`
	QueryMS      float64 `json:"query_ms"`
	Phase2MS     float64 `json:"phase2_ms"`
	Phase3MS     float64 `json:"phase3_ms"` // sum over the accept calls
	CommMS       float64 `json:"comm_ms"`
	OverheadMS   float64 `json:"overhead_ms"` // sum of the RC steps of the iterations it spanned
	FirstIter    int     `json:"first_iter"`
	LastIter     int     `json:"last_iter"`
	PendingIters int     `json:"pending_iters"` // iterations that ended with the change PENDING
}

// TotalMS is the change's total time as the thesis counts it: request until
// FINALIZED for an ADD, request until every removed process exited for a
// SUB (FINALIZED if the exits were not seen).
func (c Change) TotalMS() float64 {
	if c.Type == wire.RCSub && c.ExitedMS > 0 {
		return c.ExitedMS
	}
	return c.FinalizedMS
}

// End closes a run.
type End struct {
	Kind       string  `json:"kind"`
	Mode       string  `json:"mode"`
	Trigger    string  `json:"trigger"`
	Start      int     `json:"start"`
	Limit      int     `json:"limit"`
	Delta      int     `json:"delta"`
	Freq       int     `json:"f"`
	Iters      int     `json:"iters"` // iterations run
	Blocking   bool    `json:"blocking"`
	Problem    int64   `json:"problem_size"`
	Count      int64   `json:"count"` // the work result every iteration gave
	FinalProcs int     `json:"final_procs"`
	WallMS     float64 `json:"wall_ms"`
	Changes    int     `json:"changes"`
}

// Run is one run read back.
type Run struct {
	Iters   []Iter
	Changes []Change
	End     *End
}

// MS converts a duration to float milliseconds, rounded to microseconds.
func MS(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// Since is MS(b−a) for two unix-nanosecond stamps, 0 when either is unset.
func Since(a, b int64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return MS(time.Duration(b - a))
}

// ChangeTimes fills the runtime part of c from the master's record.
func ChangeTimes(c *Change, rec wire.RC) {
	t := rec.Times
	c.Delta, c.Type, c.Status, c.Requester, c.N = rec.Delta, rec.Type, rec.Status, rec.Requester, int(rec.N)
	c.AnnouncedMS = Since(t.Requested, t.Announced)
	c.StartedMS = Since(t.Requested, t.Started)
	c.AcceptedMS = Since(t.Requested, t.Accepted)
	c.ConfirmedMS = Since(t.Requested, t.Confirmed)
	c.FinalizedMS = Since(t.Requested, t.Finalized)
	c.ExitedMS = Since(t.Requested, t.Exited)
	c.Phase1MS = c.AnnouncedMS
}

// Read reads the lines of one run. A line may carry a prefix before its
// JSON object (dynrun's --tag-output); lines without an object (the text
// tables, which start with '#') are skipped.
func Read(r io.Reader) (Run, error) {
	var run Run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		i := bytes.IndexByte(b, '{')
		if i < 0 || bytes.HasPrefix(bytes.TrimSpace(b), []byte("#")) {
			continue
		}
		b = b[i:]
		var k struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(b, &k); err != nil {
			return run, fmt.Errorf("line %d: %w", n, err)
		}
		var err error
		switch k.Kind {
		case KindIter:
			var it Iter
			err = json.Unmarshal(b, &it)
			run.Iters = append(run.Iters, it)
		case KindChange:
			var c Change
			err = json.Unmarshal(b, &c)
			run.Changes = append(run.Changes, c)
		case KindEnd:
			var e End
			err = json.Unmarshal(b, &e)
			run.End = &e
		}
		if err != nil {
			return run, fmt.Errorf("line %d: %w", n, err)
		}
	}
	return run, sc.Err()
}

// Writer writes lines; it keeps the first error and drops later lines.
type Writer struct {
	w   io.Writer
	err error
}

// NewWriter writes JSON lines to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Line writes v as one JSON line.
func (w *Writer) Line(v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	_, w.err = w.w.Write(append(b, '\n'))
}

// Err is the first error of the writer.
func (w *Writer) Err() error { return w.err }
