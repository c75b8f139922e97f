package session_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// Helpers of the resource change tests: the malleable program
// (internal/malleable), event-driven waits for its output, and parsing of
// its lines.

// malleableApp builds internal/malleable (with the race detector when the
// tests have it) and returns its path.
func malleableApp(t testing.TB) string {
	t.Helper()
	return progs.Build(t, "github.com/dynrt/dynrt/internal/malleable")
}

// rcDVM is a test DVM that also runs the malleable program.
type rcDVM struct {
	*testDVM
	mall string
}

func startRCDVM(t testing.TB, k, s int) *rcDVM {
	t.Helper()
	return &rcDVM{testDVM: startDVM(t, k, s), mall: malleableApp(t)}
}

// start launches n processes of the malleable program.
func (d *rcDVM) start(n int, args ...string) wire.JobLaunchReply {
	return d.startProg(d.mall, n, args...)
}

func (d *rcDVM) startProg(prog string, n int, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{prog}, args...), N: uint32(n), Env: d.env, Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch malleable %v: %v", args, err)
	}
	return rep
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func removeFile(t testing.TB, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// mline is one parsed output line.
type mline = dvmtest.Line

// mlines parses the output of job; stderr lines and ERROR lines fail the
// test.
func (d *rcDVM) mlines(job string) []mline {
	d.t.Helper()
	return dvmtest.ParseLines(d.t, d.out.Lines(job))
}

// waitFor waits (without polling: woken by every output line) until the
// lines of job satisfy ok.
func (d *rcDVM) waitFor(job, what string, ok func([]mline) bool) {
	d.t.Helper()
	if !d.out.WaitFor(job, 30*time.Second, func(raw []wire.OutputLine) bool { return ok(dvmtest.ParseLines(d.t, raw)) }) {
		d.t.Fatalf("job %s: no %s in its output: %v", job, what, d.mlines(job))
	}
}

// count returns how many lines of word there are.
func count(ls []mline, word string) int {
	n := 0
	for _, l := range ls {
		if l.Word == word {
			n++
		}
	}
	return n
}

// linesOf selects the lines of word about delta ("" = any).
func linesOf(ls []mline, word, delta string) []mline {
	var out []mline
	for _, l := range ls {
		if l.Word == word && (delta == "" || l.Str("delta") == delta) {
			out = append(out, l)
		}
	}
	return out
}

// ranksOf lists the ranks of lines, sorted.
func ranksOf(ls []mline) wire.RankRanges {
	var rr wire.RankRanges
	for _, l := range ls {
		rr = rr.Add(l.Rank)
	}
	return rr
}

// request asks for a change and waits until it is settled.
func (d *rcDVM) request(req wire.RCRequest) (wire.RC, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req.Wait = true
	return d.c.RequestRC(ctx, req)
}

// mustRequest is request that must end FINALIZED.
func (d *rcDVM) mustRequest(req wire.RCRequest) wire.RC {
	d.t.Helper()
	rc, err := d.request(req)
	if err != nil {
		for _, l := range d.out.Lines(req.Job) {
			d.t.Logf("rank %d: %s", l.Rank, l.Line)
		}
		d.t.Fatalf("%s %d of %s: %v", req.Type, req.N, req.Job, err)
	}
	if rc.Status != wire.RCFinalized || !rc.Settled {
		d.t.Fatalf("%s %d: %s settled=%v, want FINALIZED and settled", req.Type, req.N, rc.Status, rc.Settled)
	}
	return rc
}

// pset reads a set (with members) through the master.
func (d *rcDVM) pset(job, name string) wire.PsetInfo {
	d.t.Helper()
	var p wire.PsetInfo
	if err := d.c.Conn().Call(context.Background(), wire.KindPsetGet, &wire.PsetGetReq{Job: job, Name: name, Members: true}, &p); err != nil {
		d.t.Fatalf("pset.get %s: %v", name, err)
	}
	return p
}

// usedSlots returns the slots in use over the DVM.
func (d *rcDVM) usedSlots() int {
	d.t.Helper()
	st, err := d.c.State(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	n := 0
	for _, nd := range st.Nodes {
		n += int(nd.Used)
	}
	return n
}

// checkTimes checks that the steps of a settled change are in order.
func checkTimes(t testing.TB, rc wire.RC) {
	t.Helper()
	ts := rc.Times
	chain := []struct {
		name string
		at   int64
	}{{"requested", ts.Requested}, {"placed", ts.Placed}, {"defined", ts.Defined}, {"jobdata", ts.JobData}, {"announced", ts.Announced}}
	switch {
	case rc.Status == wire.RCAborted:
	case rc.Type == wire.RCAdd:
		chain = append(chain, struct {
			name string
			at   int64
		}{"launched", ts.Launched}, struct {
			name string
			at   int64
		}{"started", ts.Started})
	}
	for i := range chain {
		if chain[i].at == 0 {
			t.Errorf("%s: step %s not recorded: %+v", rc.Delta, chain[i].name, ts)
		}
		if i > 0 && chain[i].at < chain[i-1].at {
			t.Errorf("%s: %s before %s: %+v", rc.Delta, chain[i].name, chain[i-1].name, ts)
		}
	}
	if rc.Status == wire.RCFinalized {
		if ts.Accepted == 0 || ts.Finalized < ts.Accepted || ts.Accepted < ts.Announced {
			t.Errorf("%s: accept/finalize out of order: %+v", rc.Delta, ts)
		}
		if rc.Type == wire.RCAdd && ts.Confirmed != ts.Finalized {
			t.Errorf("%s: confirmed %d != finalized %d", rc.Delta, ts.Confirmed, ts.Finalized)
		}
		if rc.Type == wire.RCSub && ts.Exited < ts.Finalized {
			t.Errorf("%s: exited %d before finalized %d", rc.Delta, ts.Exited, ts.Finalized)
		}
	}
}
