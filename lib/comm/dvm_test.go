package comm_test

import (
	"context"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes (see
// internal/dvmtest); the application is internal/commapp, built once per
// run by progs into a directory TestMain removes.
var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// testDVM is a DVM of virtual nodes that collects the output of its jobs.
type testDVM struct {
	t   testing.TB
	c   *tool.Client
	env []string
	app string
	out *dvmtest.Output
}

func startDVM(t testing.TB, nodes, slots int) *testDVM {
	t.Helper()
	app := progs.Build(t, "github.com/dynrt/dynrt/lib/comm/internal/commapp")
	dvm := dvmtest.Start(t, dvmtest.Options{Nodes: nodes, Slots: slots, KillGrace: 300 * time.Millisecond})
	d := &testDVM{t: t, env: dvm.Env, app: app}
	d.c = dvm.Attach(t)
	d.out = dvmtest.CollectOutput(d.c)
	return d
}

func (d *testDVM) launch(n int, mapBy string, args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{d.app}, args...), N: uint32(n), MapBy: mapBy, Env: d.env,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch commapp %v: %v", args, err)
	}
	return rep.Job
}

// wait waits for the end of job, which must be a success, and returns its
// lines.
func (d *testDVM) wait(job string) []line {
	d.t.Helper()
	end := dvmtest.WaitJob(d.t, d.c, job, 60*time.Second)
	ls := d.lines(job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		for _, l := range ls {
			d.t.Logf("rank %d: %s %v", l.Rank, l.Word, l.Attrs)
		}
		d.t.Fatalf("job %s ended %s with code %d: %s", job, end.State, end.Code, end.Msg)
	}
	return ls
}

// run launches commapp and waits for its successful end.
func (d *testDVM) run(n int, mapBy string, args ...string) []line {
	d.t.Helper()
	return d.wait(d.launch(n, mapBy, args...))
}

// line is one parsed output line of commapp.
type line = dvmtest.Line

// lines parses the output of job; stderr and ERROR lines fail the test.
func (d *testDVM) lines(job string) []line {
	d.t.Helper()
	return dvmtest.ParseLines(d.t, d.out.Lines(job))
}

// waitFor waits, woken by every output line, until the lines of job
// satisfy ok.
func (d *testDVM) waitFor(job, what string, ok func([]line) bool) {
	d.t.Helper()
	if !d.out.WaitFor(job, 40*time.Second, func(raw []wire.OutputLine) bool { return ok(dvmtest.ParseLines(d.t, raw)) }) {
		for _, l := range d.lines(job) {
			d.t.Logf("rank %d: %s %v", l.Rank, l.Word, l.Attrs)
		}
		d.t.Fatalf("job %s: timed out waiting for %s", job, what)
	}
}

func only(ls []line, word string) []line {
	var out []line
	for _, l := range ls {
		if l.Word == word {
			out = append(out, l)
		}
	}
	return out
}

// request asks for a change and waits until it is settled.
func (d *testDVM) request(req wire.RCRequest) wire.RC {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req.Wait = true
	rc, err := d.c.RequestRC(ctx, req)
	if err != nil {
		d.t.Fatalf("%s %d of %s: %v", req.Type, req.N, req.Job, err)
	}
	return rc
}
