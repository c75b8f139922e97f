package master

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestSetPushedDuringLaunch (issue 11 item 14): a set defined while a
// node's launch of the job is still being served reaches that node after
// the job, so the process started there finds it. The daemon holds the
// fork back (envLaunchGate) until the set operation has been answered,
// which happens only once every daemon has taken the push.
func TestSetPushedDuringLaunch(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	t.Setenv(envLaunchGate, gate)
	d := startDVM(t, 2, 1)
	d.sleeper(1) // fills node0: the job below goes to node1
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defs := make(chan wire.Event, 16)
	if _, err := d.c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{wire.EvPsetDef}}, func(ev wire.Event) { defs <- ev }); err != nil {
		t.Fatal(err)
	}
	app := pset.AppName("late")
	type launched struct {
		rep wire.JobLaunchReply
		err error
	}
	res := make(chan launched, 1)
	go func() {
		rep, err := d.launch(wire.JobLaunchReq{Argv: []string{exe, "pset", app + "/x"}, N: 1, Name: "late", Env: []string{envRole + "=app"}})
		res <- launched{rep, err}
	}()
	// The job's sets are published as it is placed, before its launch
	// round: the round is in flight, held back on node1.
	var job string
	for job == "" {
		select {
		case ev := <-defs:
			if ev.Pset != nil && ev.Pset.Name == app {
				job = ev.Job
			}
		case <-ctx.Done():
			t.Fatal("the job's sets were not published")
		}
	}
	if _, err := d.c.PsetOp(ctx, wire.PsetOpReq{Job: job, Op: wire.OpUnion, P1: app, P2: pset.NameWorld, Target: app + "/x"}); err != nil {
		t.Fatalf("set operation during the launch: %v", err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := <-res
	if l.err != nil {
		t.Fatal(l.err)
	}
	if pl := l.rep.Placement; len(pl) != 1 || pl[0].Node != "node1" {
		t.Fatalf("placed %+v, want node1", pl)
	}
	end := d.wait(job)
	out := d.output(job)
	if end.State != wire.JobStateDone || len(out) != 1 {
		t.Fatalf("job ended %+v, output %v", end, out)
	}
	var p wire.PsetInfo
	if err := json.Unmarshal(out[0].Line, &p); err != nil || p.Name != app+"/x" || p.Size != 1 {
		t.Errorf("the process on node1 sees %s (%v)", out[0].Line, err)
	}
}
