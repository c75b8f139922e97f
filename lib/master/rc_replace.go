package master

import (
	"slices"
	"strings"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
)

// REPLACE (docs/rc.md "REPLACE"): N processes leave and N new ones take
// their place, in one change. Its delta set holds the new processes, and
// mpi://rte/<app>/rc/<n>/out the replaced ones. It is bound to the one
// malleable set that holds every replaced process and runs like an ADD:
// the set's members (the replaced ones among them, if alive) accept with
// the set they continue with, normally UNION(DIFFERENCE(set, out), delta),
// and the new processes confirm. Only then, FINALIZED, are the replaced
// processes told to leave (their accept answers terminate); they get the
// grace period of a SUB before they are killed. Until FINALIZED an abort
// leaves the job exactly as it was: the new processes are stopped and the
// replaced ones never learnt they were to go.

// adds reports whether the change starts processes (ADD, REPLACE).
func (run *rcRun) adds() bool { return run.typ == wire.RCAdd || run.typ == wire.RCReplace }

// leaving lists the processes the change takes away once it is through:
// a SUB's delta, a REPLACE's replaced processes.
func (run *rcRun) leaving() []uint32 {
	switch run.typ {
	case wire.RCSub:
		return run.ranks
	case wire.RCReplace:
		return run.out
	}
	return nil
}

// goingAway reports whether the processes of leaving() are on their way
// out: a SUB past its first accept (it can no longer be canceled, and
// the accept told them to leave), a REPLACE once FINALIZED.
func (run *rcRun) goingAway() bool {
	st := run.r.Status()
	switch run.typ {
	case wire.RCSub:
		return st == rc.StatusPending || st == rc.StatusFinalized
	case wire.RCReplace:
		return st == rc.StatusFinalized
	}
	return false
}

// procLeaving reports whether p is on its way out of its job
// (goingAway) and has not ended yet. "Every live process" of a fence or
// a group construct leaves such processes out: they will not enter, and
// their exit would fail it.
func (s *state) procLeaving(p procRef) bool {
	jr := s.rcs().jobs[p.job]
	return jr != nil && jr.cur != nil && jr.cur.goingAway() && slices.Contains(jr.cur.leaving(), p.rank)
}

// leavingSet names the set of leaving().
func (run *rcRun) leavingSet() string {
	if run.typ == wire.RCReplace {
		return run.outSet
	}
	return run.r.Delta()
}

// rcPlanReplace checks a REPLACE, chooses the processes it replaces (as a
// SUB chooses its victims) and places as many new ones (as an ADD does,
// bound to the set that holds every replaced process).
func (s *state) rcPlanReplace(j *job, b *wire.RCRequest) ([]uint32, []alloc.Proc, []string, error) {
	if err := b.Ranks.Check(); err != nil {
		return nil, nil, nil, err
	}
	named := b.Ranks.Ranks()
	switch {
	case len(named) > 0 && b.N != 0 && int(b.N) != len(named):
		return nil, nil, nil, wire.Errorf(wire.ErrInvalid, "master: REPLACE of %d processes names %d ranks", b.N, len(named))
	case len(named) == 0 && b.N == 0:
		return nil, nil, nil, wire.Errorf(wire.ErrInvalid, "master: a REPLACE needs a positive number of processes or the ranks to replace")
	}
	out, err := s.rcVictims(j, b, named, "REPLACE")
	if err != nil {
		return nil, nil, nil, err
	}
	bound, err := s.replaceBound(j, b, out)
	if err != nil {
		return nil, nil, nil, err
	}
	add := wire.RCRequest{Job: b.Job, Type: wire.RCAdd, N: uint32(len(out)), Bound: []string{bound}}
	placed, _, err := s.rcPlanAdd(j, &add)
	if err != nil {
		return nil, nil, nil, err
	}
	return out, placed, []string{bound}, nil
}

// replaceBound is the malleable set a REPLACE of out binds to: the named
// one, or else the one that holds every process of out.
func (s *state) replaceBound(j *job, b *wire.RCRequest, out []uint32) (string, error) {
	xm := j.reg.Malleable()
	or := wire.RangesOf(out)
	holds := func(name string) (all, some bool) {
		ms, err := j.reg.Members(name)
		if err != nil {
			return false, false
		}
		n := 0
		for _, r := range ms {
			if or.Contains(r) {
				n++
			}
		}
		return n == len(out), n > 0
	}
	if len(b.Bound) == 1 {
		n, err := pset.Parse(b.Bound[0])
		if err != nil {
			return "", err
		}
		name := n.String()
		if !slices.Contains(xm, name) {
			return "", wire.Errorf(wire.ErrInvalid, "master: pset %s is not malleable (a REPLACE binds to one of %s)", name, strings.Join(xm, ", "))
		}
		if all, _ := holds(name); !all {
			return "", wire.Errorf(wire.ErrInvalid, "master: REPLACE of ranks %s: not all of them are members of %s", or, name)
		}
		return name, nil
	}
	var touched []string
	for _, name := range xm {
		all, some := holds(name)
		if all {
			return name, nil
		}
		if some {
			touched = append(touched, name)
		}
	}
	return "", wire.Errorf(wire.ErrInvalid, "master: REPLACE of ranks %s: no malleable set holds all of them (they are spread over %s); replace the members of one set at a time", or, strings.Join(touched, ", "))
}
