package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestSplitOverWire: SPLIT through pset.op from a tool, on a job of 5
// processes on 3 virtual nodes (ranks 0-1 on node0, 2-3 on node1, 4 on
// node2). Each process waits for a gate, then asks its own daemon for the
// node2 part of the by-node split: every daemon must already hold it, since
// the master answers only once all of them took the push. Bad requests are
// refused with a clear error and change nothing.
func TestSplitOverWire(t *testing.T) {
	d := startDVM(t, 3, 2)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := d.launch(wire.JobLaunchReq{Name: "sp", N: 5, Env: []string{envRole + "=app"},
		Argv: sh(`while [ ! -e ` + gate + ` ]; do sleep 0.05; done; exec ` + exe + ` pset mpi://app/sp/bynode/2`)})
	if err != nil {
		t.Fatal(err)
	}
	app := pset.AppName(job.App)
	on := job.Job
	op := func(req wire.PsetOpReq) (wire.PsetOpReply, error) {
		req.Job, req.Op = on, wire.OpSplit
		return d.c.PsetOp(ctx, req)
	}
	type part struct{ name, members string }
	check := func(what string, rep wire.PsetOpReply, err error, want []part, nodes []string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(rep.Parts) != len(want) || strings.Join(rep.Nodes, ",") != strings.Join(nodes, ",") || rep.Name != "" {
			t.Fatalf("%s: %+v, want %d parts on nodes %v", what, rep, len(want), nodes)
		}
		for i, p := range rep.Parts {
			if p.Name != want[i].name || p.Members.String() != want[i].members || p.Size != uint32(p.Members.Count()) || p.Version != 0 || p.Job != job.Job {
				t.Errorf("%s: part %d = %+v, want %s = %s", what, i, p, want[i].name, want[i].members)
			}
		}
	}

	defs := make(chan string, 64)
	if _, err := d.c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{wire.EvPsetDef}, Job: job.Job}, func(ev wire.Event) {
		if ev.Pset != nil && strings.HasPrefix(ev.Pset.Name, app+"/bynode/") {
			defs <- ev.Pset.Name
		}
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := op(wire.PsetOpReq{P1: app, Mode: wire.SplitNode, Target: app + "/bynode"})
	check("by node", rep, err, []part{{app + "/bynode/0", "0-1"}, {app + "/bynode/1", "2-3"}, {app + "/bynode/2", "4"}}, []string{"node0", "node1", "node2"})
	if !rep.Parts[0].Active {
		t.Errorf("a part of the active application set is inactive: %+v", rep.Parts[0])
	}
	// Each part is announced as a pset.def event, in part order.
	for i := range 3 {
		select {
		case name := <-defs:
			if want := fmt.Sprintf("%s/bynode/%d", app, i); name != want {
				t.Errorf("event %d names %s, want %s", i, name, want)
			}
		case <-ctx.Done():
			t.Fatalf("only %d pset.def events for the parts", i)
		}
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	rep, err = op(wire.PsetOpReq{P1: app, Mode: wire.SplitParts, K: 2, Names: []string{app + "/lo", app + "/hi"}, Hints: map[string]string{"half": "1"}})
	check("by count", rep, err, []part{{app + "/lo", "0-2"}, {app + "/hi", "3-4"}}, nil)
	if rep.Parts[1].Hints["half"] != "1" {
		t.Errorf("hints not set on the parts: %+v", rep.Parts[1])
	}
	no := false
	rep, err = op(wire.PsetOpReq{P1: pset.NameWorld, Mode: wire.SplitRanks, Lists: []wire.RankRanges{wire.RangesOf([]uint32{4, 0}), wire.Span(1, 3)}, Active: &no})
	if err == nil && (!strings.HasPrefix(rep.Parts[0].Name, app+"/split-") || !strings.HasSuffix(rep.Parts[1].Name, "/1") || rep.Parts[0].Active) {
		t.Errorf("by ranks with generated names: %+v", rep.Parts)
	}
	check("by ranks", rep, err, []part{{rep.Parts[0].Name, "0,4"}, {rep.Parts[1].Name, "1-3"}}, nil)

	// Every process read the node2 part from its own daemon.
	end := d.wait(job.Job)
	out := d.output(job.Job)
	if end.State != wire.JobStateDone || len(out) != 5 {
		t.Fatalf("job ended %+v, output %v", end, out)
	}
	for _, l := range out {
		var p wire.PsetInfo
		if err := json.Unmarshal(l.Line, &p); err != nil || p.Name != app+"/bynode/2" || p.Members.String() != "4" {
			t.Errorf("rank %d's daemon has %s (%v)", l.Rank, l.Line, err)
		}
	}

	// A job whose processes have all exited has no node to split by, and
	// ended jobs take no operations; the bad requests run on a live job.
	live := d.sleeper(3)
	lapp := pset.AppName(live.App)
	on = live.Job
	delta, err := d.rc(wire.RCRequest{Job: live.Job, Type: wire.RCSub, Ranks: wire.Span(2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	var before wire.PsetList
	if err := d.c.Conn().Call(ctx, wire.KindPsetList, &wire.PsetListReq{Job: live.Job}, &before); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  wire.PsetOpReq
		want *wire.Error
		msg  string
	}{
		{"no mode", wire.PsetOpReq{P1: lapp, K: 2}, wire.ErrInvalid, "no mode given"},
		{"unknown mode", wire.PsetOpReq{P1: lapp, Mode: "halves"}, wire.ErrInvalid, `unknown mode "halves"`},
		{"k=0", wire.PsetOpReq{P1: lapp, Mode: wire.SplitParts}, wire.ErrInvalid, "into 0 parts"},
		{"k>size", wire.PsetOpReq{P1: lapp, Mode: wire.SplitParts, K: 4}, wire.ErrInvalid, "(3 members) into 4 parts"},
		{"lists with count", wire.PsetOpReq{P1: lapp, Mode: wire.SplitParts, K: 1, Lists: []wire.RankRanges{wire.Span(0, 2)}}, wire.ErrInvalid, "give one mode"},
		{"overlapping lists", wire.PsetOpReq{P1: lapp, Mode: wire.SplitRanks, Lists: []wire.RankRanges{wire.Span(0, 1), wire.Span(1, 2)}}, wire.ErrInvalid, "in more than one part: 1"},
		{"missing ranks", wire.PsetOpReq{P1: lapp, Mode: wire.SplitRanks, Lists: []wire.RankRanges{wire.Span(0, 0)}}, wire.ErrInvalid, "members in no part: 1-2"},
		{"not members", wire.PsetOpReq{P1: lapp, Mode: wire.SplitRanks, Lists: []wire.RankRanges{wire.Span(0, 2), wire.Span(7, 7)}}, wire.ErrInvalid, "not members: 7"},
		{"delta set", wire.PsetOpReq{P1: delta.Delta, Mode: wire.SplitParts, K: 1}, wire.ErrInvalid, "delta set"},
		{"no such set", wire.PsetOpReq{P1: lapp + "/nosuch", Mode: wire.SplitParts, K: 1}, wire.ErrNotFound, lapp + "/nosuch"},
		{"second operand", wire.PsetOpReq{P1: lapp, P2: lapp, Mode: wire.SplitParts, K: 1}, wire.ErrInvalid, "not a second operand"},
		{"too many names", wire.PsetOpReq{P1: lapp, Mode: wire.SplitNode, Names: []string{lapp + "/a", lapp + "/b", lapp + "/c"}}, wire.ErrInvalid, "3 name(s) given for 2 part(s)"},
		{"split fields on a union", wire.PsetOpReq{Op: wire.OpUnion, P1: lapp, P2: lapp, Target: lapp + "/u", K: 2}, wire.ErrInvalid, "union: mode, k, lists and names are fields of a split"},
		{"unknown op", wire.PsetOpReq{Op: "splice", P1: lapp}, wire.ErrInvalid, "(want union, difference, intersection, null or split)"},
		{"k over the list limit", wire.PsetOpReq{P1: lapp, Mode: wire.SplitParts, K: 1 << 30}, wire.ErrLimit, "list-items"},
		{"a list of 2^32 ranks", wire.PsetOpReq{P1: lapp, Mode: wire.SplitRanks, Lists: []wire.RankRanges{wire.Span(0, 1<<32-1)}}, wire.ErrLimit, "procs-per-job"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.req.Op != "" {
				c.req.Job = on
				_, err := d.c.PsetOp(ctx, c.req)
				if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("got %v, want %s naming %q", err, c.want.Code, c.msg)
				}
				return
			}
			_, err := op(c.req)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %s naming %q", err, c.want.Code, c.msg)
			}
		})
	}
	var after wire.PsetList
	if err := d.c.Conn().Call(ctx, wire.KindPsetList, &wire.PsetListReq{Job: live.Job}, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Sets) != len(before.Sets) {
		t.Errorf("refused splits changed the sets: %d before, %d after", len(before.Sets), len(after.Sets))
	}
	d.kill(live.Job)
	on = job.Job
	if _, err := op(wire.PsetOpReq{P1: app, Mode: wire.SplitParts, K: 1}); !errors.Is(err, wire.ErrState) {
		t.Errorf("split in an ended job: %v", err)
	}
}
