package mpichsuite

import (
	"fmt"
	"io"
	"strings"
)

// Some of MPICH's tests are flaky in MPICH itself (the ft tests crash or
// race now and then under Hydra too), so one run per runner gives random
// differences both ways. With rechecks (RECHECK=k), a dynrun runner whose
// first try disagrees with its reference's runs again with it, alternating,
// up to k more times each, and the pair is judged on every try.

// Outcome is how a dynrun runner's tries of a test compare with its
// reference's.
type Outcome string

// Outcomes of a pair.
const (
	// Agree: the first tries agree (both pass or both fail).
	Agree Outcome = "agree"
	// Differs: the reference passed every try and dynrun failed at least
	// one: a real difference.
	Differs Outcome = "differs"
	// Flaky: the reference passed some tries and failed others: the test
	// is flaky in MPICH itself, whatever dynrun did.
	Flaky Outcome = "flaky"
	// DynrunOnly: the reference failed every try, dynrun passed at least
	// one.
	DynrunOnly Outcome = "dynrun-only"
)

// Pair is a dynrun runner's tries of one test with one build and its
// reference's, each in try order.
type Pair struct {
	Build    string
	Test     Test
	Runner   Runner
	Ref      Runner
	Tries    []Result
	RefTries []Result
}

// refAtLimit reports whether the reference passed a try only at the time
// limit: the test is meant to run into it (init/timeout).
func (p Pair) refAtLimit() bool {
	for _, r := range p.RefTries {
		if r.Verdict.Passed() && r.Verdict.AtLimit {
			return true
		}
	}
	return false
}

// counts reports whether a dynrun try counts as passed: runtests' verdict,
// except that a pass that lasted until the time limit counts only when the
// reference passed that way too (else dynrun hung where Hydra did not).
func (p Pair) counts(r Result) bool {
	return r.Verdict.Passed() && (!r.Verdict.AtLimit || p.refAtLimit())
}

// Passes returns how many tries of dynrun and of the reference passed.
func (p Pair) Passes() (dynrun, ref int) {
	for _, r := range p.Tries {
		if p.counts(r) {
			dynrun++
		}
	}
	for _, r := range p.RefTries {
		if r.Verdict.Passed() {
			ref++
		}
	}
	return dynrun, ref
}

// firstDiffer reports whether the first tries disagree.
func (p Pair) firstDiffer() bool {
	if len(p.Tries) == 0 || len(p.RefTries) == 0 {
		return false
	}
	return p.counts(p.Tries[0]) != p.RefTries[0].Verdict.Passed()
}

// Outcome classifies the pair from all its tries.
func (p Pair) Outcome() Outcome {
	if !p.firstDiffer() {
		return Agree
	}
	_, ref := p.Passes()
	switch ref {
	case len(p.RefTries):
		return Differs
	case 0:
		return DynrunOnly
	}
	return Flaky
}

// Counts is "hydra 3/4, dynrun-warm 1/4": each side's passes of its tries.
func (p Pair) Counts() string {
	d, r := p.Passes()
	return fmt.Sprintf("%s %d/%d, %s %d/%d", p.Ref, r, len(p.RefTries), p.Runner, d, len(p.Tries))
}

func (p Pair) String() string {
	return fmt.Sprintf("%s %s %s: %s", p.Build, p.Runner, p.Test.ID(), p.Counts())
}

// Recheck says which side of p runs next: the reference (ref true) or the
// dynrun runner, alternating from the reference, each at most 1+k tries;
// ok is false when nothing more runs: the first tries agree, or both sides
// have passed and failed (flaky under both: more tries change nothing), or
// both have had 1+k tries. The reference's tries may be more than the
// pair's own (a reference shared by two dynrun runners).
func Recheck(p Pair, k int) (ref, ok bool) {
	if !p.firstDiffer() {
		return false, false
	}
	d, r := p.Passes()
	if 0 < d && d < len(p.Tries) && 0 < r && r < len(p.RefTries) {
		return false, false
	}
	most := 1 + k
	switch {
	case len(p.RefTries) <= len(p.Tries) && len(p.RefTries) < most:
		return true, true
	case len(p.Tries) < most:
		return false, true
	case len(p.RefTries) < most:
		return true, true
	}
	return false, false
}

// Pairs returns, in run order, every pair of a dynrun runner and its
// reference (Runner.Reference) that both ran a test.
func Pairs(results []Result) []Pair {
	order, m := rows(results)
	have := haveRunner(results)
	var out []Pair
	for _, k := range order {
		rw := m[k]
		for _, rn := range Runners {
			if !rn.Dynrun() || len(rw.tries[rn]) == 0 {
				continue
			}
			ref := rn.Reference(have)
			if len(rw.tries[ref]) == 0 {
				continue
			}
			out = append(out, Pair{Build: k.build, Test: rw.test, Runner: rn, Ref: ref, Tries: rw.tries[rn], RefTries: rw.tries[ref]})
		}
	}
	return out
}

// WriteComparison writes the pairs whose first tries disagreed and were
// judged on all their tries: the tests only dynrun passes and those flaky
// under the reference, with each side's passes (the real differences are
// Differences'). It writes nothing when there are none.
func WriteComparison(w io.Writer, results []Result) {
	var flaky, only []string
	for _, p := range Pairs(results) {
		switch p.Outcome() {
		case Flaky:
			flaky = append(flaky, "  "+p.String())
		case DynrunOnly:
			only = append(only, "  "+p.String())
		}
	}
	if len(flaky) > 0 {
		fmt.Fprintf(w, "\n%d runs flaky under the reference (it passed some tries and failed others; no difference):\n%s\n", len(flaky), strings.Join(flaky, "\n"))
	}
	if len(only) > 0 {
		fmt.Fprintf(w, "\n%d runs pass under dynrun but under the reference in no try:\n%s\n", len(only), strings.Join(only, "\n"))
	}
}
