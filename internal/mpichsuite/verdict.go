package mpichsuite

import (
	"fmt"
	"regexp"
	"strings"
)

// Run is what happened when a test ran under one launcher.
type Run struct {
	Output   []byte // stdout and stderr merged, as runtests reads them (2>&1)
	Exit     int    // the launcher's exit status (0 when it was killed by a signal)
	Signal   int    // the signal that ended the launcher, 0 if it exited
	TimedOut bool   // the harness killed it (the launcher did not end it at the limit)
	// AtLimit: the launcher ran until the time limit and ended the job
	// itself (MPIEXEC_TIMEOUT, which runtests sets and both launchers
	// honour). Judged as runtests does; a test that passes this way
	// under dynrun but not under Hydra still differs (a hang).
	AtLimit bool
	// Leftovers are processes of the test still running after the launcher
	// ended (described for the report); the harness kills them.
	Leftovers []string
	// Harm is set when the run damaged the launcher's DVM (the warm DVM
	// lost a daemon): a failure even if runtests' check passed.
	Harm string
	// NotRun is set when the test could not be started at all: the program
	// failed to build, or the launcher could not be started.
	NotRun string
}

// Kind is the outcome class of a verdict.
type Kind string

// Outcome classes; everything but Pass is a failure.
const (
	Pass     Kind = "pass"
	Fail     Kind = "fail"     // runtests' checks failed
	Timeout  Kind = "timeout"  // killed at the time limit
	Leftover Kind = "leftover" // passed runtests' checks but left processes running
	NotRun   Kind = "notrun"   // not built, or the launcher did not start
)

// Verdict judges one run of one test.
type Verdict struct {
	Kind    Kind
	Reason  string // why it failed; empty for Pass
	AtLimit bool   // the run lasted until the time limit (Run.AtLimit)
}

// Passed reports whether the run passed.
func (v Verdict) Passed() bool { return v.Kind == Pass }

// Label is the verdict as the table shows it: an expected failure (xfail=)
// that failed reads "xfail", as runtests' TAP output marks it TODO.
func (v Verdict) Label(t Test) string {
	l := string(v.Kind)
	if !v.Passed() && t.XFail != "" {
		l = "xfail(" + l + ")"
	}
	if v.AtLimit {
		l += "@limit"
	}
	return l
}

var (
	reNoErrors   = regexp.MustCompile(`^\s*No [Ee]rrors\s*$`)
	reTestPassed = regexp.MustCompile(`^\s*Test Passed\s*$`)
	reCheckpoint = regexp.MustCompile(`(requesting checkpoint|checkpoint completed)\s*$`)
	reSrunError  = regexp.MustCompile(`^srun: error: .*: signal: Communication connection failure`)
)

// Judge applies runtests' check for t.ResultTest to r, and marks a run
// that lasted until the limit. Two rules are stricter than runtests, the
// same for every launcher: a run the harness had to kill (the launcher did
// not end it at the limit) fails as a timeout whatever the check, and
// processes left running fail a test that otherwise passed.
func Judge(t Test, r Run) Verdict {
	v := judge(t, r)
	v.AtLimit = r.AtLimit
	return v
}

func judge(t Test, r Run) Verdict {
	if r.NotRun != "" {
		return Verdict{Kind: NotRun, Reason: r.NotRun}
	}
	if r.TimedOut {
		return Verdict{Kind: Timeout, Reason: "killed by the harness after the time limit" + leftoverNote(r)}
	}
	var reason string
	switch t.ResultTest {
	case ResultDefault:
		reason = checkDefault(r)
	case ResultTestStatus, ResultTestErrFatal:
		// TestStatus stops reading at the first line (its pattern matches
		// every line), TestErrFatal allows any output: only the status counts.
		reason = needNonZero(r)
	case ResultTestStatusNoErrors:
		reason = checkStatusNoErrors(r)
	default:
		reason = fmt.Sprintf("unknown resultTest %q", t.ResultTest)
	}
	if reason != "" {
		return Verdict{Kind: Fail, Reason: reason + leftoverNote(r)}
	}
	if r.Harm != "" {
		return Verdict{Kind: Fail, Reason: r.Harm + leftoverNote(r)}
	}
	if len(r.Leftovers) > 0 {
		return Verdict{Kind: Leftover, Reason: "left running: " + strings.Join(r.Leftovers, "; ")}
	}
	return Verdict{Kind: Pass}
}

func leftoverNote(r Run) string {
	if len(r.Leftovers) == 0 {
		return ""
	}
	return "; also left running: " + strings.Join(r.Leftovers, "; ")
}

// lines splits output into lines as Perl's <FH> reads them (a last line
// without a newline is still a line), dropping runtests' skipped
// "FORTRAN STOP" lines.
func lines(out []byte) []string {
	s := string(out)
	s = strings.TrimSuffix(s, "\n")
	if s == "" && len(out) == 0 {
		return nil
	}
	var ls []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, "FORTRAN STOP") {
			continue
		}
		ls = append(ls, l)
	}
	return ls
}

// checkDefault: exactly one " No Errors" line, nothing else but "Test Passed"
// (and checkpoint chatter), exit status 0.
func checkDefault(r Run) string {
	found := false
	unexpected := -1 // index of the first unexpected line
	ls := lines(r.Output)
	for i, l := range ls {
		switch {
		case !found && reNoErrors.MatchString(l):
			found = true
		case reSrunError.MatchString(l):
		case reTestPassed.MatchString(l), reCheckpoint.MatchString(l):
		default:
			if unexpected < 0 {
				unexpected = i
			}
		}
	}
	switch {
	case unexpected >= 0:
		return fmt.Sprintf("unexpected output: %q", ls[unexpected])
	case !found:
		return "no \" No Errors\" line"
	case r.Signal != 0:
		return fmt.Sprintf("killed by signal %d", r.Signal)
	case r.Exit != 0:
		return fmt.Sprintf("exit status %d", r.Exit)
	}
	return ""
}

// checkStatusNoErrors: only " No Errors"/"Test Passed" lines, at least one
// " No Errors", and a non-zero status (a fault-tolerance test whose dead
// rank makes mpiexec fail while the survivors report success).
func checkStatusNoErrors(r Run) string {
	found := false
	unexpected := -1
	ls := lines(r.Output)
	for i, l := range ls {
		if reNoErrors.MatchString(l) {
			found = true
			continue
		}
		if !reTestPassed.MatchString(l) && unexpected < 0 {
			unexpected = i
		}
	}
	switch {
	case unexpected >= 0:
		return fmt.Sprintf("unexpected output: %q", ls[unexpected])
	case !found:
		return "no \" No Errors\" line"
	}
	return needNonZero(r)
}

func needNonZero(r Run) string {
	if r.Exit == 0 && r.Signal == 0 {
		return "exit status 0 where the test needs a non-zero status"
	}
	return ""
}
