package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// progs builds the binaries of the end-to-end test; TestMain removes them.
var progs = &dvmtest.Programs{}

// The test binary doubles as the node daemon of the virtual nodes other
// than node 0 (see internal/dvmtest).
func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// testDVM is a DVM of k virtual nodes for one test. Its directory is
// $DYNRT_DIR for the test, so dyntop finds it as "the only live DVM".
// The test's cleanup stops it and checks that nothing is left.
type testDVM struct {
	*dvmtest.DVM
	t   *testing.T
	m   *master.Master
	c   *tool.Client
	dir string
}

func startDVM(t *testing.T, k, slots int) *testDVM {
	t.Helper()
	d := dvmtest.Start(t, dvmtest.Options{Nodes: k, Slots: slots, Name: "toptest", SetEnv: true})
	return &testDVM{DVM: d, t: t, m: d.M, c: d.Attach(t), dir: d.Dir}
}

// launch starts n processes of argv named app; they live until the test
// ends (the test's client launched them).
func (d *testDVM) launch(app string, n int, argv ...string) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{Argv: argv, N: uint32(n), Name: app, Env: d.Env})
	if err != nil {
		d.t.Fatalf("launch: %v", err)
	}
	return rep
}

// run runs dyntop with args and returns its exit code and output.
func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"dyntop"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}
