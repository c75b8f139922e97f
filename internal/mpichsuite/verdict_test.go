package mpichsuite

import (
	"fmt"
	"strings"
	"testing"
)

// hydraAbort is what mpiexec.hydra prints when a rank calls MPI_Abort(7)
// (its own words are not copied here: the shape is what matters).
const hydraAbort = "application called MPI_Abort(MPI_COMM_WORLD, 7) - process 0\n"

func TestJudge(t *testing.T) {
	def := Test{Dir: "d", Name: "p", NP: 2}
	status := def
	status.ResultTest = ResultTestStatus
	noerr := def
	noerr.ResultTest = ResultTestStatusNoErrors
	fatal := def
	fatal.ResultTest = ResultTestErrFatal

	cases := []struct {
		name string
		test Test
		run  Run
		want Kind
	}{
		// The default check: " No Errors" once, nothing else but
		// "Test Passed", exit status 0.
		{"default/no-errors", def, Run{Output: []byte(" No Errors\n")}, Pass},
		{"default/lowercase-e", def, Run{Output: []byte("No errors\n")}, Pass},
		{"default/no-newline-at-end", def, Run{Output: []byte(" No Errors")}, Pass},
		{"default/test-passed-too", def, Run{Output: []byte(" No Errors\nTest Passed\n")}, Pass},
		{"default/fortran-stop-skipped", def, Run{Output: []byte("FORTRAN STOP\n No Errors\n")}, Pass},
		{"default/checkpoint-chatter", def, Run{Output: []byte("[0] requesting checkpoint\n No Errors\n[0] checkpoint completed\n")}, Pass},
		{"default/srun-line-skipped", def, Run{Output: []byte("srun: error: n1: task 0: signal: Communication connection failure\n No Errors\n")}, Pass},
		{"default/exit-status", def, Run{Output: []byte(" No Errors\n"), Exit: 1}, Fail},
		{"default/signal", def, Run{Output: []byte(" No Errors\n"), Signal: 9}, Fail},
		{"default/other-output", def, Run{Output: []byte("rank 1 says hi\n No Errors\n")}, Fail},
		{"default/no-errors-twice", def, Run{Output: []byte(" No Errors\n No Errors\n")}, Fail},
		{"default/empty-line", def, Run{Output: []byte(" No Errors\n\n")}, Fail},
		{"default/no-output", def, Run{}, Fail},
		{"default/no-errors-in-a-sentence", def, Run{Output: []byte("Found No Errors here\n")}, Fail},
		{"default/abort", def, Run{Output: []byte(hydraAbort), Exit: 7}, Fail},
		// TestStatus: only a non-zero status counts.
		{"status/nonzero-with-output", status, Run{Output: []byte(hydraAbort), Exit: 7}, Pass},
		{"status/signal", status, Run{Signal: 9}, Pass},
		{"status/zero", status, Run{Output: []byte(" No Errors\n")}, Fail},
		// TestStatusNoErrors: " No Errors" (any number of times), nothing
		// else but "Test Passed", and a non-zero status.
		{"noerrors/pass", noerr, Run{Output: []byte(" No Errors\n"), Exit: 1}, Pass},
		{"noerrors/twice-allowed", noerr, Run{Output: []byte(" No Errors\n No Errors\nTest Passed\n"), Exit: 1}, Pass},
		{"noerrors/zero-status", noerr, Run{Output: []byte(" No Errors\n")}, Fail},
		{"noerrors/other-output", noerr, Run{Output: []byte(" No Errors\n" + hydraAbort), Exit: 1}, Fail},
		{"noerrors/missing", noerr, Run{Exit: 1}, Fail},
		// TestErrFatal: any output, a non-zero status.
		{"errfatal/pass", fatal, Run{Output: []byte("Fatal error in MPI_Send\n"), Exit: 1}, Pass},
		{"errfatal/zero", fatal, Run{Output: []byte(" No Errors\n")}, Fail},
		// The harness's own rules, the same for every launcher.
		{"timeout/default", def, Run{Output: []byte(" No Errors\n"), TimedOut: true, Signal: 15}, Timeout},
		{"timeout/status-test-still-fails", status, Run{TimedOut: true, Signal: 15}, Timeout},
		// Ended by the launcher at the limit (MPIEXEC_TIMEOUT): judged as
		// runtests does, marked.
		{"at-limit/errfatal-passes", fatal, Run{Exit: 255, AtLimit: true}, Pass},
		{"at-limit/default-fails", def, Run{Output: []byte(" No Errors\n"), Exit: 255, AtLimit: true}, Fail},
		{"leftover/after-pass", def, Run{Output: []byte(" No Errors\n"), Leftovers: []string{"pid 42 ./p"}}, Leftover},
		{"leftover/after-fail", def, Run{Exit: 1, Leftovers: []string{"pid 42 ./p"}}, Fail},
		{"harm/dvm-broken", def, Run{Output: []byte(" No Errors\n"), Harm: "the warm DVM lost a process"}, Fail},
		{"notrun/not-built", def, Run{NotRun: "program d/p was not built"}, NotRun},
	}
	var out strings.Builder
	for _, c := range cases {
		v := Judge(c.test, c.run)
		if v.Kind != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, v.Kind, v.Reason, c.want)
		}
		if (v.Kind == Pass) != (v.Reason == "") {
			t.Errorf("%s: kind %s with reason %q", c.name, v.Kind, v.Reason)
		}
		if v.AtLimit != c.run.AtLimit {
			t.Errorf("%s: AtLimit %v, want the run's %v", c.name, v.AtLimit, c.run.AtLimit)
		}
		fmt.Fprintf(&out, "%s\t%s\t%s\n", c.name, v.Label(c.test), v.Reason)
	}
	golden(t, "verdicts.golden", []byte(out.String()))
}

func TestVerdictLabel(t *testing.T) {
	x := Test{Name: "die", XFail: "ticket2237"}
	if l := (Verdict{Kind: Timeout}).Label(x); l != "xfail(timeout)" {
		t.Errorf("failed xfail test labelled %q", l)
	}
	if l := (Verdict{Kind: Pass}).Label(x); l != "pass" {
		t.Errorf("passing xfail test labelled %q", l)
	}
	if l := (Verdict{Kind: Pass, AtLimit: true}).Label(x); l != "pass@limit" {
		t.Errorf("pass at the limit labelled %q", l)
	}
	if l := (Verdict{Kind: Fail}).Label(Test{Name: "p"}); l != "fail" {
		t.Errorf("failed test labelled %q", l)
	}
}
