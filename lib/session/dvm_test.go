package session_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes (see
// internal/dvmtest); the application is internal/testapp, built once per
// run by progs into a directory TestMain removes.

// testGrace is the SIGTERM→SIGKILL grace in tests.
const testGrace = 300 * time.Millisecond

var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// testApp builds internal/testapp (with the race detector when the tests
// have it) and returns its path.
func testApp(t testing.TB) string {
	t.Helper()
	return progs.Build(t, "github.com/dynrt/dynrt/internal/testapp")
}

// testDVM is a DVM of virtual nodes for one test, stopped and checked for
// leftovers in the test's cleanup.
type testDVM struct {
	t   testing.TB
	m   *master.Master
	c   *tool.Client
	dir string
	env []string
	app string
	out *dvmtest.Output
}

// startDVM starts a DVM of k virtual nodes with s slots each: node 0 in
// this process, the others as re-executed test binaries.
func startDVM(t testing.TB, k, s int) *testDVM {
	t.Helper()
	app := testApp(t)
	dvm := dvmtest.Start(t, dvmtest.Options{Nodes: k, Slots: s, KillGrace: testGrace})
	d := &testDVM{t: t, m: dvm.M, dir: dvm.Dir, env: dvm.Env, app: app}
	d.c = dvm.Attach(t)
	d.out = dvmtest.CollectOutput(d.c)
	return d
}

// launch starts n processes of the test application.
func (d *testDVM) launch(n int, mapBy string, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{d.app}, args...), N: uint32(n), MapBy: mapBy, Env: d.env,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch testapp %v: %v", args, err)
	}
	return rep
}

func (d *testDVM) wait(job string) wire.JobInfo {
	d.t.Helper()
	return dvmtest.WaitJob(d.t, d.c, job, 60*time.Second)
}

// run launches the test application and waits for a successful end; it
// returns the stdout lines by rank.
func (d *testDVM) run(n int, mapBy string, args ...string) (wire.JobLaunchReply, map[uint32][]string) {
	d.t.Helper()
	rep := d.launch(n, mapBy, args...)
	end := d.wait(rep.Job)
	lines := d.lines(rep.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		d.t.Fatalf("testapp %v ended %s with code %d: %s\noutput: %v", args, end.State, end.Code, end.Msg, lines)
	}
	return rep, lines
}

// lines returns the stdout lines of job by rank (stderr lines fail the
// test: the race detector reports there).
func (d *testDVM) lines(job string) map[uint32][]string {
	d.t.Helper()
	out := map[uint32][]string{}
	for _, l := range d.out.Lines(job) {
		if l.Stream == wire.StreamStderr {
			d.t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		out[l.Rank] = append(out[l.Rank], string(l.Line))
	}
	return out
}

// waitLine waits until a rank of job prints a line starting with prefix.
func (d *testDVM) waitLine(job, prefix string) {
	d.t.Helper()
	if !d.out.WaitFor(job, 20*time.Second, func(ls []wire.OutputLine) bool {
		return slices.ContainsFunc(ls, func(l wire.OutputLine) bool { return strings.HasPrefix(string(l.Line), prefix) })
	}) {
		d.t.Fatalf("job %s printed no line starting with %q", job, prefix)
	}
}
