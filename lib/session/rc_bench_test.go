package session_test

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Benchmarks of resource changes (issue 4, item 8) on a virtual DVM of 4
// nodes × 28 slots with a job of 28 malleable processes. The step times
// come from the change's own record (wire.RCTimes), measured from the
// request: announced, all new processes started, PENDING (accept
// published), FINALIZED and, for a SUB, all removed processes exited.
//
//	go test -run '^$' -bench 'RC|PsetOp' -benchtime 10x ./lib/session

func benchTimes(b *testing.B, rcs []wire.RC, exited bool) {
	b.Helper()
	var ann, sta, acc, fin, ext float64
	for _, rc := range rcs {
		ms := func(t int64) float64 {
			if t == 0 {
				return 0
			}
			return float64(t-rc.Times.Requested) / 1e6
		}
		ann += ms(rc.Times.Announced)
		sta += ms(rc.Times.Started)
		acc += ms(rc.Times.Accepted)
		fin += ms(rc.Times.Finalized)
		ext += ms(rc.Times.Exited)
	}
	n := float64(len(rcs))
	b.ReportMetric(ann/n, "ms-announced")
	if sta > 0 {
		b.ReportMetric(sta/n, "ms-started")
	}
	b.ReportMetric(acc/n, "ms-pending")
	b.ReportMetric(fin/n, "ms-finalized")
	if exited {
		b.ReportMetric(ext/n, "ms-exited")
	}
}

// benchJob starts the DVM and a 28-process malleable job that adapts to
// every change until it is killed.
func benchJob(b *testing.B) (*rcDVM, wire.JobLaunchReply) {
	d := startRCDVM(b, 4, 28)
	job := d.start(28, "-timeout", "1h", "-quiet")
	b.Cleanup(func() {
		_ = d.c.KillJob(context.Background(), job.Job, 0, 0)
		d.wait(job.Job)
	})
	return d, job
}

// change requests a change and waits until every process that stays has
// reported it, so that the next change starts on a quiet job.
func (d *rcDVM) change(job string, typ string, stay int) wire.RC {
	rc := d.mustRequest(wire.RCRequest{Job: job, Type: typ, N: 28})
	d.waitFor(job, "reports of "+rc.Delta, func(ls []mline) bool { return len(linesOf(ls, "STATE", rc.Delta)) == stay })
	return rc
}

func BenchmarkRCAdd28(b *testing.B) {
	d, job := benchJob(b)
	var rcs []wire.RC
	b.ResetTimer()
	for range b.N {
		rcs = append(rcs, d.change(job.Job, wire.RCAdd, 56))
		b.StopTimer()
		d.change(job.Job, wire.RCSub, 28)
		b.StartTimer()
	}
	benchTimes(b, rcs, false)
}

func BenchmarkRCSub28(b *testing.B) {
	d, job := benchJob(b)
	var rcs []wire.RC
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		d.change(job.Job, wire.RCAdd, 56)
		b.StartTimer()
		rcs = append(rcs, d.change(job.Job, wire.RCSub, 28))
	}
	benchTimes(b, rcs, true)
}

// benchInApp runs `malleable -bench op -n N` over n processes and reports
// what rank 0 measured (per call: mean as ns/op, median and p90).
func benchInApp(b *testing.B, op string, procs int) {
	d := startRCDVM(b, 4, 28)
	calls := max(b.N, 200)
	job := d.start(procs, "-bench", op, "-n", strconv.Itoa(calls))
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone {
		b.Fatalf("bench job ended %s: %s\n%v", end.State, end.Msg, d.mlines(job.Job))
	}
	ls := linesOf(d.mlines(job.Job), "BENCH", "")
	if len(ls) != 1 {
		b.Fatalf("%d BENCH lines", len(ls))
	}
	l := ls[0]
	b.ReportMetric(float64(l.Num("mean")), "ns/op")
	b.ReportMetric(float64(l.Num("median"))/1e3, "µs-median")
	b.ReportMetric(float64(l.Num("p90"))/1e3, "µs-p90")
	b.Logf("%s over %d processes: %d calls, median %v, p90 %v", op, procs, l.Num("n"),
		time.Duration(l.Num("median")), time.Duration(l.Num("p90")))
}

// BenchmarkPsetOp112: a set operation on a set of 112 members, from a
// process, until every daemon holds the result.
func BenchmarkPsetOp112(b *testing.B) { benchInApp(b, "psetop", 112) }

// BenchmarkRCQuery: the query of listing 6.1, answered by the daemon.
func BenchmarkRCQuery(b *testing.B) { benchInApp(b, "query", 28) }

// BenchmarkRelayFloor112: a lookup relayed by the daemon to the master and
// back, in the same 112-process job as BenchmarkPsetOp112: a set operation
// costs this plus its pushes to the daemons.
func BenchmarkRelayFloor112(b *testing.B) { benchInApp(b, "lookup", 112) }

// BenchmarkExitFloor28: 28 idle processes of the malleable program (no
// session, no DVM) are told to exit at once, by closing their stdin; the
// time until all have been reaped is the floor of a SUB 28's "all exited"
// on this machine (the processes of a real SUB also tear down a session).
func BenchmarkExitFloor28(b *testing.B) {
	bin := malleableApp(b)
	var total time.Duration
	for range b.N {
		b.StopTimer()
		cmds := make([]*exec.Cmd, 28)
		ins := make([]io.WriteCloser, 28)
		for i := range cmds {
			c := exec.Command(bin, "-idle")
			in, err := c.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			out, err := c.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
				b.Fatal(err)
			}
			cmds[i], ins[i] = c, in
		}
		b.StartTimer()
		t0 := time.Now()
		for _, in := range ins {
			_ = in.Close()
		}
		for _, c := range cmds {
			if err := c.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "ms-exited")
}
