package session_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Recovery from a failure (issue 13, item 6): the time from a kill -9
// until the job runs again at its new size, split into
//
//	detect  the kill until the master made the failure change (its
//	        requested step): the exit or the lost daemon seen, the burst
//	        of losses gathered;
//	change  the failure change from its request until FINALIZED
//	        (every survivor accepted; a REPLACE: the new processes
//	        confirmed);
//	resume  FINALIZED until the last process is back at work (the
//	        malleable program's STATE line, stamped by the process);
//	total   the kill until the last process is back at work;
//
// for a process loss (kill -9 of one rank), a node loss (kill -9 of a
// node's daemon: its 7 ranks) and a hung node (its daemon SIGSTOPped,
// declared down by the heartbeats: every 250 ms, down after 4 missed, so
// detection takes about 1 s by design), under the shrink and the replace
// policy.
// The job is 28 malleable processes on 4 virtual nodes of 7 slots (for
// replace 5 nodes, so that a lost node's ranks find free slots on the
// fifth); every iteration starts a new DVM and job (not timed). Beside it, what a
// launcher that restarts everything pays at least: the launch of the
// same job until every process runs (launch).
//
//	go test -run '^$' -bench Failure -benchtime 10x ./lib/session   (-v: every change's steps)
func BenchmarkFailure(b *testing.B) {
	for _, policy := range []string{wire.OnFailureShrink, wire.OnFailureReplace} {
		for _, loss := range []string{"process", "node", "hung"} {
			b.Run(policy+"/"+loss, func(b *testing.B) { benchFailure(b, policy, loss) })
		}
	}
}

func benchFailure(b *testing.B, policy, loss string) {
	const slots = 7
	nodes := 4
	if policy == wire.OnFailureReplace {
		nodes = 5
	}
	var detect, change, resume, total, launch []time.Duration
	for range b.N {
		b.StopTimer()
		dvm := dvmtest.Start(b, dvmtest.Options{Nodes: nodes, Slots: slots, KillGrace: testGrace,
			HeartbeatInterval: 250 * time.Millisecond, HeartbeatMisses: 4})
		d := &rcDVM{testDVM: &testDVM{t: b, m: dvm.M, dir: dvm.Dir, env: dvm.Env}, mall: malleableApp(b)}
		d.c = dvm.Attach(b)
		d.out = dvmtest.CollectOutput(d.c)
		t0 := time.Now()
		job := d.startWith(wire.JobLaunchReq{OnFailure: policy}, 28, "-timeout", "1h", "-quiet")
		launch = append(launch, time.Since(t0))
		// The processes on node2 (ranks 14-20, 7 slots each): one of
		// them, or all.
		_, procs := d.liveProcs(job.Job)
		var pid int
		lost := 1
		sig := syscall.SIGKILL
		if loss != "process" {
			st, err := d.c.State(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			i := slices.IndexFunc(st.Nodes, func(n wire.NodeInfo) bool { return n.Name == "node2" })
			pid, lost = st.Nodes[i].PID, slots
			if loss == "hung" {
				sig = syscall.SIGSTOP
				// Running again, it finds its master gone, kills its
				// processes and exits; the DVM's cleanup checks that.
				b.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			}
		} else {
			pid = procs[16].PID
		}
		b.StartTimer()
		kill := time.Now()
		if err := syscall.Kill(pid, sig); err != nil {
			b.Fatal(err)
		}
		rc := d.settledLater(pset.DeltaName(job.App, 1))
		stay := 28 - lost
		if policy == wire.OnFailureReplace {
			stay = 28
		}
		var back int64
		d.waitFor(job.Job, "every member back at work", func(ls []mline) bool {
			st := linesOf(ls, "STATE", rc.Delta)
			back = 0
			for _, l := range st {
				back = max(back, int64(l.Num("t")))
			}
			return len(st) == stay
		})
		b.StopTimer()
		if rc.Status != wire.RCFinalized || rc.Cause == nil || rc.Cause.Ranks.Count() != lost {
			b.Fatalf("failure change %+v", rc)
		}
		if testing.Verbose() {
			tm := rc.Times
			ms := func(x int64) string {
				if x == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f", float64(x-tm.Requested)/1e6)
			}
			b.Logf("steps (ms from the request): defined %s jobdata %s announced %s launched %s started %s accepted %s confirmed %s finalized %s back %s",
				ms(tm.Defined), ms(tm.JobData), ms(tm.Announced), ms(tm.Launched), ms(tm.Started), ms(tm.Accepted), ms(tm.Confirmed), ms(tm.Finalized), ms(back))
		}
		detect = append(detect, time.Duration(rc.Times.Requested-kill.UnixNano()))
		change = append(change, time.Duration(rc.Times.Finalized-rc.Times.Requested))
		resume = append(resume, time.Duration(back-rc.Times.Finalized))
		total = append(total, time.Duration(back-kill.UnixNano()))
		_ = d.c.KillJob(context.Background(), job.Job, 0, 0)
		d.wait(job.Job)
		b.StartTimer()
	}
	for _, m := range []struct {
		name string
		v    []time.Duration
	}{{"detect", detect}, {"change", change}, {"resume", resume}, {"total", total}, {"launch", launch}} {
		b.ReportMetric(medianMS(m.v), "ms-"+m.name)
	}
	b.Logf("%s: total %s", b.Name(), fmt.Sprint(total))
}

func medianMS(v []time.Duration) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return float64(s[len(s)/2]) / 1e6
}
