package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// The direction column of the message catalogue (docs/wire.md) is exactly
// what the master serves: a request kind is served on tool connections iff
// the catalogue says tool→master, on daemon connections (the daemon's own
// requests and those it relays for its clients) iff it says daemon→master.
// Clients never reach the master directly (it refuses their hello), so a
// kind a client may send must say client→daemon→master. Before the fix
// pset.query was listed tool→master and answered unknown_kind, and
// pset.op, pset.delete and rc.request were listed client→master.
func TestCatalogueDirectionsMaster(t *testing.T) {
	m := &Master{daemonMux: wire.NewMux(), toolMux: wire.NewMux(), ops: make(chan func(*state), 16), loopDone: make(chan struct{})}
	m.routes()
	for _, side := range []struct {
		from string
		mux  *wire.Mux
	}{{wire.RoleTool, m.toolMux}, {wire.RoleDaemon, m.daemonMux}} {
		served := side.mux.Kinds()
		for _, k := range wire.Catalogue() {
			if k.Event || k.Kind == wire.KindHello {
				continue // events and the handshake are not served by a Mux
			}
			if says, does := k.Sends(side.from, wire.RoleMaster), slices.Contains(served, k.Kind); says != does {
				t.Errorf("%s: the catalogue says %q, but the master serves it from a %s: %v", k.Kind, k.Dir, side.from, does)
			}
			if k.Sends(wire.RoleClient, wire.RoleMaster) && k.Dir != "either way" {
				t.Errorf("%s: the catalogue says %q, but the master admits no clients", k.Kind, k.Dir)
			}
		}
		for _, kind := range served {
			if _, ok := wire.LookupKind(kind); !ok {
				t.Errorf("the master serves %s from a %s, which the catalogue does not list", kind, side.from)
			}
		}
	}
}

// pset.query from a tool (it used to be answered unknown_kind): exact
// versions, the latest sets holding a rank, and a clear not_found for a
// version that does not exist.
func TestPsetQueryFromTool(t *testing.T) {
	d := startDVM(t, 1, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job := d.sleeper(4)
	app := pset.AppName(job.App)
	lo, hi := app+"/lo", app+"/hi"
	if _, err := d.c.PsetOp(ctx, wire.PsetOpReq{Job: job.Job, Op: wire.OpSplit, P1: app, Mode: wire.SplitParts, K: 2, Names: []string{lo, hi}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.PsetOp(ctx, wire.PsetOpReq{Job: job.Job, Op: wire.OpUnion, P1: lo, P2: hi, Target: lo}); err != nil {
		t.Fatal(err) // lo@1 = 0-3
	}
	query := func(q wire.PsetQueryReq) (string, error) {
		q.Job, q.Members = job.Job, true
		var l wire.PsetList
		if err := d.c.Conn().Call(ctx, wire.KindPsetQuery, &q, &l); err != nil {
			return "", err
		}
		var got []string
		for _, p := range l.Sets {
			got = append(got, fmt.Sprintf("%s@%d=%s", p.Name, p.Version, p.Members))
		}
		return strings.Join(got, " "), nil
	}
	two := uint32(2)
	tests := []struct {
		name string
		q    wire.PsetQueryReq
		want string
	}{
		{"exact versions", wire.PsetQueryReq{Refs: []wire.PsetRef{{Name: lo, Version: 1}, {Name: hi}, {Name: lo}}},
			fmt.Sprintf("%s@0=2-3 %s@0=0-1 %s@1=0-3", hi, lo, lo)},
		{"sets holding rank 2", wire.PsetQueryReq{Rank: &two},
			fmt.Sprintf("%s@0=0-3 %s@0=0-3 %s@0=2-3 %s@1=0-3", pset.NameWorld, app, hi, lo)},
	}
	for _, tc := range tests {
		if got, err := query(tc.q); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := query(wire.PsetQueryReq{Refs: []wire.PsetRef{{Name: hi, Version: 5}}}); !errors.Is(err, wire.ErrNotFound) || !strings.Contains(err.Error(), hi) {
		t.Errorf("unknown version: %v, want not_found naming %s", err, hi)
	}
	// An optional field: absent means the documented default (the latest
	// version), zero is a value (version 0).
	zero := uint32(0)
	for _, tc := range []struct {
		ver  *uint32
		want string
	}{{nil, "1=0-3"}, {&zero, "0=0-1"}} {
		var p wire.PsetInfo
		err := d.c.Conn().Call(ctx, wire.KindPsetGet, &wire.PsetGetReq{Job: job.Job, Name: lo, Version: tc.ver, Members: true}, &p)
		if got := fmt.Sprintf("%d=%s", p.Version, p.Members); err != nil || got != tc.want {
			t.Errorf("pset.get %s ver %v: %s, %v; want %s", lo, tc.ver, got, err, tc.want)
		}
	}
	d.kill(job.Job)
}

// A fence with no participant list is over every live process of the
// caller's job, as wire.md defines it: a process of the job that has ended
// before the fence began is not waited for, while a list naming it is
// refused (aborted). Real processes through their daemon.
func TestFenceEmptyListIsLiveJob(t *testing.T) {
	d := startDVM(t, 1, 3)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	job, err := d.launch(wire.JobLaunchReq{Name: "fe", N: 3, Env: []string{envRole + "=app"},
		Argv: sh(`[ "$DYNRT_RANK" = 2 ] && exit 0; while [ ! -e ` + gate + ` ]; do sleep 0.05; done; exec ` + exe + ` fence`)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ended := false; !ended; {
		for _, p := range d.procs(job.Job) {
			ended = ended || (p.Rank == 2 && p.State == wire.ProcStateExited)
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 2 did not exit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	end := d.wait(job.Job)
	got := map[uint32][]string{}
	for _, l := range d.output(job.Job) {
		got[l.Rank] = append(got[l.Rank], string(l.Line))
	}
	want := []string{"empty: ok", "0-2: " + string(wire.CodeAborted)}
	if end.State != wire.JobStateDone || !slices.Equal(got[0], want) || !slices.Equal(got[1], want) || len(got[2]) != 0 {
		t.Fatalf("job %s (%s), output %v; want %v from ranks 0 and 1", end.State, end.Msg, got, want)
	}
}
