package report

import (
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// IterSeries is what the per-iteration figure (thesis fig. 8.1) draws:
// one stacked bar per iteration.
type IterSeries struct {
	Iter    []int
	Procs   []int
	Work    []float64 // work + rebalance
	Sync    []float64
	RC      []float64 // the resource-change step
	Pending []bool    // a change was pending after this iteration's step
	// Spans are the runs of iterations in which the root handled a change
	// (from the one that saw it announced to the one in which it ended):
	// the thesis's hatched areas.
	Spans [][2]int
	// Failures are the failure changes (made by the runtime of lost
	// processes, docs/rc.md "Failures as changes"): the iteration they
	// took effect in, and how many processes were lost.
	Failures []Failure
}

// Failure is a failure change in an IterSeries.
type Failure struct {
	Iter int
	Lost int
}

// WithFailures adds to s the failure changes among cs (requester runtime).
func (s IterSeries) WithFailures(cs []Change) IterSeries {
	for _, c := range cs {
		if c.Requester == wire.ByRuntime && c.Status == wire.RCFinalized {
			s.Failures = append(s.Failures, Failure{Iter: c.FirstIter, Lost: c.N})
		}
	}
	return s
}

// Iterations builds the series from the iteration lines, in iteration
// order.
func Iterations(its []Iter) IterSeries {
	its = slices.Clone(its)
	slices.SortStableFunc(its, func(a, b Iter) int { return a.Iter - b.Iter })
	var s IterSeries
	for i, it := range its {
		s.Iter = append(s.Iter, it.Iter)
		s.Procs = append(s.Procs, it.Procs)
		s.Work = append(s.Work, it.WorkMS+it.RebalanceMS)
		s.Sync = append(s.Sync, it.SyncMS)
		s.RC = append(s.RC, it.RCMS)
		s.Pending = append(s.Pending, it.Pending())
		switch {
		case it.Delta == "":
		case i > 0 && its[i-1].Delta == it.Delta && len(s.Spans) > 0:
			s.Spans[len(s.Spans)-1][1] = it.Iter
		default:
			s.Spans = append(s.Spans, [2]int{it.Iter, it.Iter})
		}
	}
	return s
}

// Phase names the per-phase figures draw, in order.
var Phases = []string{"phase 1", "phase 2", "phase 3", "comm create"}

// PhaseValue is change c's value for phase i of Phases.
func PhaseValue(c Change, i int) float64 {
	switch i {
	case 0:
		return c.Phase1MS
	case 1:
		return c.Phase2MS
	case 2:
		return c.Phase3MS
	}
	return c.CommMS
}

// PhaseSeries is one figure of thesis fig. 8.2 (ADD) or 8.3 (SUB): for
// every phase, one group of bars per n_delta, a bar per n_start (ADD) or
// n_dest (SUB), each the median over the changes.
type PhaseSeries struct {
	Type     string
	Blocking bool
	Deltas   []int // x categories, ascending
	Sizes    []int // n_start or n_dest, ascending: one bar per size in every group
	// Values[phase][size index][delta index]; 0 where no change was seen.
	Values [][][]float64
}

// PhasesOf builds the series of the finalized changes of type typ made
// with blocking or non-blocking accept.
func PhasesOf(changes []Change, typ string, blocking bool) PhaseSeries {
	s := PhaseSeries{Type: typ, Blocking: blocking}
	changes = slices.DeleteFunc(slices.Clone(changes), func(c Change) bool { return c.Blocking != blocking })
	size := func(c Change) int {
		if typ == wire.RCSub {
			return c.To
		}
		return c.From
	}
	for _, c := range changes {
		if c.Type != typ || c.Status != wire.RCFinalized {
			continue
		}
		if !slices.Contains(s.Deltas, c.N) {
			s.Deltas = append(s.Deltas, c.N)
		}
		if !slices.Contains(s.Sizes, size(c)) {
			s.Sizes = append(s.Sizes, size(c))
		}
	}
	slices.Sort(s.Deltas)
	slices.Sort(s.Sizes)
	s.Values = make([][][]float64, len(Phases))
	for p := range Phases {
		s.Values[p] = make([][]float64, len(s.Sizes))
		for si, n := range s.Sizes {
			s.Values[p][si] = make([]float64, len(s.Deltas))
			for di, d := range s.Deltas {
				var xs []float64
				for _, c := range changes {
					if c.Type == typ && c.Status == wire.RCFinalized && size(c) == n && c.N == d {
						xs = append(xs, PhaseValue(c, p))
					}
				}
				s.Values[p][si][di] = Median(xs)
			}
		}
	}
	return s
}

// Empty reports whether there is nothing to draw.
func (s PhaseSeries) Empty() bool { return len(s.Deltas) == 0 }
