package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Segment is a run of steps with a fixed set of processes, timed by the
// root (the halo exchanges keep the processes in step, so the root's step
// time is the job's). Durations are totals over the segment.
type Segment struct {
	Procs     int           `json:"procs"`
	FirstStep int           `json:"first_step"`
	Steps     int           `json:"steps"`
	Compute   time.Duration `json:"compute_ns"`  // the Jacobi sweeps
	Halo      time.Duration `json:"halo_ns"`     // ghost-row exchanges
	Residual  time.Duration `json:"residual_ns"` // max-norm allreduces
	Check     time.Duration `json:"check_ns"`    // RC queries and broadcasts of the root's decision
}

// StepTime is the mean wall time of one step in the segment.
func (s Segment) StepTime() time.Duration {
	if s.Steps == 0 {
		return 0
	}
	return (s.Compute + s.Halo + s.Residual + s.Check) / time.Duration(s.Steps)
}

func (s Segment) per(d time.Duration) time.Duration {
	if s.Steps == 0 {
		return 0
	}
	return d / time.Duration(s.Steps)
}

// Change is one resource change as the root handled it.
type Change struct {
	Delta  string `json:"delta"`
	Type   string `json:"type"`
	Status string `json:"status"` // FINALIZED or ABORTED
	From   int    `json:"from"`   // processes before
	To     int    `json:"to"`     // and after
	Step   int    `json:"step"`   // steps done when it took effect (or was given up)
	// RTPhase1 is the runtime's part of phase 1 (request to announcement,
	// from the master's stamps); Seen the time until the root noticed the
	// announcement (depends on --check). Neither stops the computation.
	RTPhase1 time.Duration `json:"rt_phase1_ns"`
	Seen     time.Duration `json:"seen_ns"`
	// What the application spent, stopped: the query that found the change
	// and the broadcast of the decision (phase 1), the set operation
	// (phase 2), every accept call (phase 3), creating the communicator
	// over the new set, and moving the rows.
	Phase1 time.Duration `json:"phase1_ns"`
	Phase2 time.Duration `json:"phase2_ns"`
	Phase3 time.Duration `json:"phase3_ns"`
	Comm   time.Duration `json:"comm_ns"`
	Redist time.Duration `json:"redist_ns"`
	// Accepts counts the accept calls; Pending and PendingSteps the wall
	// time and the steps computed between the first and the last (a
	// non-blocking accept of a grow whose new processes are still
	// starting).
	Accepts      int           `json:"accepts"`
	Pending      time.Duration `json:"pending_ns"`
	PendingSteps int           `json:"pending_steps"`
	MovedRows    int           `json:"moved_rows"` // rows that changed process
	SegBefore    int           `json:"seg_before"` // index of the segment before the change
	// A failure change (--buddy): the ranks lost, and the steps the
	// survivors went back to the last complete checkpoint.
	Lost     string `json:"lost,omitempty"`
	Rollback int    `json:"rollback_steps,omitempty"`
}

// Overhead is O_rc: the time the change stopped the computation.
func (c Change) Overhead() time.Duration { return c.Phase1 + c.Phase2 + c.Phase3 + c.Comm + c.Redist }

// History is what the root knows about the run; it travels to the new root
// with every change so that the final summary covers the whole run.
type History struct {
	Segments []Segment `json:"segments"`
	Changes  []Change  `json:"changes"`
}

// Amortisation is thesis §8.4 for one change: it pays back once the steps
// after it have saved more than it cost, after more than N = O/G steps.
type Amortisation struct {
	Delta string        `json:"delta"`
	O     time.Duration `json:"o_rc_ns"` // overhead of the change
	G     time.Duration `json:"g_rc_ns"` // step time before minus after
	// N is O/G, After the first whole number of steps that pays back;
	// both 0 when G ≤ 0 (the change never pays back).
	N     float64 `json:"n_rc"`
	After int     `json:"pays_back_after"`
}

// Amortise computes the §8.4 figure of every finalized change whose
// segments before and after both have steps.
func (h History) Amortise() []Amortisation {
	var out []Amortisation
	for _, c := range h.Changes {
		if c.Status != "FINALIZED" || c.SegBefore+1 >= len(h.Segments) {
			continue
		}
		before, after := h.Segments[c.SegBefore], h.Segments[c.SegBefore+1]
		if before.Steps == 0 || after.Steps == 0 {
			continue
		}
		a := Amortisation{Delta: c.Delta, O: c.Overhead(), G: before.StepTime() - after.StepTime()}
		if a.G > 0 {
			a.N = float64(a.O) / float64(a.G)
			a.After = int(math.Floor(a.N)) + 1
		}
		out = append(out, a)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

// shortDelta drops the common prefix of delta names: "rc/3".
func shortDelta(d string) string {
	if i := strings.LastIndex(d, "/rc/"); i >= 0 {
		return d[i+1:]
	}
	return d
}

// WriteSummary prints the human summary: the segments, the changes with
// their phases, and the amortisation of each change. Times in ms.
func WriteSummary(w io.Writer, nx, ny, steps int, residual float64, h History) error {
	fmt.Fprintf(w, "heat %dx%d, %d steps, final residual %.6g\n\n", nx, ny, steps, residual)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "steps\tprocs\tstep ms\tcompute\thalo\tresidual\tcheck\t")
	for _, s := range h.Segments {
		if s.Steps == 0 {
			continue // two changes in a row, or one after the last step
		}
		fmt.Fprintf(tw, "%d-%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", s.FirstStep, s.FirstStep+s.Steps-1, s.Procs,
			ms(s.StepTime()), ms(s.per(s.Compute)), ms(s.per(s.Halo)), ms(s.per(s.Residual)), ms(s.per(s.Check)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(h.Changes) == 0 {
		fmt.Fprintln(w, "\nno resource changes")
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "change\ttype\tprocs\tstep\tstatus\tphase1\tphase2\tphase3\taccepts\tpending\tcomm\tredist\trows\tO_rc ms\t")
	for _, c := range h.Changes {
		pending := "-"
		if c.PendingSteps > 0 || c.Accepts > 1 {
			pending = fmt.Sprintf("%s/%d st", ms(c.Pending), c.PendingSteps)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d→%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t\n", shortDelta(c.Delta), c.Type,
			c.From, c.To, c.Step, c.Status, ms(c.Phase1), ms(c.Phase2), ms(c.Phase3), c.Accepts, pending,
			ms(c.Comm), ms(c.Redist), c.MovedRows, ms(c.Overhead()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	am := h.Amortise()
	if len(am) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\namortisation (thesis §8.4: a change pays back after n_rc > O_rc / G_rc steps)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "change\tO_rc ms\tG_rc ms/step\tn_rc\tpays back\t")
	for _, a := range am {
		n, after := "never", "never"
		if a.After > 0 {
			n, after = fmt.Sprintf("%.2f", a.N), fmt.Sprintf("after %d steps", a.After)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", shortDelta(a.Delta), ms(a.O), ms(a.G), n, after)
	}
	return tw.Flush()
}
