//go:build pmix

package master

import (
	"fmt"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestPMIxJobControl: a plain PMIx client (testdata/pmix/events.c) calls
// PMIx_Job_control_nb on 1 and 2 virtual nodes. Killing another rank
// ends that rank (killed by the runtime) and the job goes on and ends
// with status 0, as under mpirun.openmpi (whose own run is checked too);
// killing its whole namespace ends the job as a kill does; a signal
// reaches the target, which goes on (mpirun.openmpi 4.1 ignores signal
// requests, so there is nothing to compare with).
func TestPMIxJobControl(t *testing.T) {
	prog := pmixProgram(t, "events")
	for _, nodes := range []int{1, 2} {
		d := startDVM(t, nodes, 2)
		for _, tc := range []struct {
			args  []string
			code  int
			state string
			lines []string
			rank1 string // state of rank 1 at the end
		}{
			{[]string{"kill", "1"}, 0, wire.JobStateDone, []string{"rank 0 job control: SUCCESS"}, wire.ProcStateKilled},
			{[]string{"kill", "all"}, 128 + 15, wire.JobStateKilled, nil, wire.ProcStateKilled}, // rank 0 may be gone before the answer
			{[]string{"signal", "1", "10"}, 0, wire.JobStateDone, []string{"rank 0 job control: SUCCESS", "rank 1 got signal 10"}, wire.ProcStateExited},
		} {
			what := fmt.Sprintf("%d nodes, %v: ", nodes, tc.args)
			rep, end := d.run(wire.JobLaunchReq{Argv: append([]string{prog}, tc.args...), N: 2, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
			if end.Code != tc.code || end.State != tc.state {
				t.Errorf("%sjob ended %d %s (%s), want %d %s\n%s", what, end.Code, end.State, end.Msg, tc.code, tc.state, stderrOf(d, rep.Job))
			}
			if got := lines(d, rep.Job); tc.lines != nil || len(got) > 1 || (len(got) == 1 && got[0] != "rank 0 job control: SUCCESS") {
				checkLines(t, what, got, tc.lines)
			}
			if ps := d.procs(rep.Job); len(ps) != 2 || ps[1].State != tc.rank1 {
				t.Errorf("%sprocesses %+v, want rank 1 %s", what, ps, tc.rank1)
			}
			checkScratchGone(t, rep.Job)
		}
	}
	got, code := mpirunOMPI(t, 2, prog, "kill", "1")
	if code != 0 || len(got) != 1 || got[0] != "rank 0 job control: SUCCESS" {
		t.Errorf("mpirun.openmpi: exit %d, output %q", code, got)
	}
}
