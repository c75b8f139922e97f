package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestRCGrowShrink grows a 2-process job to 4, 8 and 16 processes over 4
// virtual nodes of 4 slots and shrinks it back to 4, from a tool (then
// to 3, which ends the program). It
// checks the delta sets, the versions and epochs of the sets
// (Definition 1), the job data every process sees once a change is
// FINALIZED, the slots, and that the job ends cleanly.
func TestRCGrowShrink(t *testing.T) {
	d := startRCDVM(t, 4, 4)
	job := d.start(2, "-last", "5")
	app := job.App
	appSet := pset.AppName(app)

	// rc.state comes once per status (it used to repeat a status for every
	// update of the record); rc.update carries the other updates, in the
	// status of the last rc.state.
	var mu sync.Mutex
	statuses := map[string][]string{}
	updates := map[string]int{}
	ctx := context.Background()
	if _, err := d.c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{"rc."}, Job: job.Job}, func(ev wire.Event) {
		mu.Lock()
		defer mu.Unlock()
		s := statuses[ev.RC.Delta]
		switch {
		case ev.Kind == wire.EvRCState:
			statuses[ev.RC.Delta] = append(s, ev.RC.Status)
		case ev.Kind == wire.EvRCUpdate && (len(s) == 0 || s[len(s)-1] != ev.RC.Status):
			t.Errorf("rc.update of %s in status %s after the rc.state events %v", ev.RC.Delta, ev.RC.Status, s)
		default:
			updates[ev.RC.Delta]++
		}
	}); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		typ       string
		n         int
		delta     wire.RankRanges
		size      int
		members   wire.RankRanges
		usedSlots int
	}{
		{wire.RCAdd, 2, wire.Span(2, 3), 4, wire.Span(0, 3), 4},
		{wire.RCAdd, 4, wire.Span(4, 7), 8, wire.Span(0, 7), 8},
		{wire.RCAdd, 8, wire.Span(8, 15), 16, wire.Span(0, 15), 16},
		{wire.RCSub, 12, wire.Span(4, 15), 4, wire.Span(0, 3), 4},
	}
	for i, st := range steps {
		n := i + 1
		delta := pset.DeltaName(app, uint64(n))
		rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: st.typ, N: uint32(st.n)})
		if rc.Delta != delta || rc.Type != st.typ || rc.N != uint32(st.n) || rc.Ranks.String() != st.delta.String() {
			t.Fatalf("change %d: %s %s n=%d ranks %s, want %s %s n=%d ranks %s", n, rc.Delta, rc.Type, rc.N, rc.Ranks, delta, st.typ, st.n, st.delta)
		}
		if !slices.Equal(rc.Bound, []string{appSet}) || len(rc.BoundRefs) != 1 || rc.BoundRefs[0].Version != uint32(i) {
			t.Errorf("change %d: bound %v %v, want %s@%d", n, rc.Bound, rc.BoundRefs, appSet, i)
		}
		if rc.Requester != wire.ByTool {
			t.Errorf("change %d: requester %q", n, rc.Requester)
		}
		checkTimes(t, rc)

		// Definition 1: the n-th delta has epoch n; the application set,
		// rebuilt by the application with the delta, takes it over.
		ds := d.pset(job.Job, delta)
		if ds.Epoch != uint32(n) || ds.Version != 0 || ds.Members.String() != st.delta.String() {
			t.Errorf("delta %s: epoch %d version %d members %s, want %d, 0, %s", delta, ds.Epoch, ds.Version, ds.Members, n, st.delta)
		}
		as := d.pset(job.Job, appSet)
		if as.Version != uint32(n) || as.Epoch != uint32(n) || as.Members.String() != st.members.String() {
			t.Errorf("after change %d: %s version %d epoch %d members %s, want %d, %d, %s", n, appSet, as.Version, as.Epoch, as.Members, n, n, st.members)
		}
		if w := d.pset(job.Job, pset.NameWorld); w.Version != 0 || w.Members.String() != "0-1" {
			t.Errorf("WORLD changed: version %d members %s", w.Version, w.Members)
		}
		if got := d.usedSlots(); got != st.usedSlots {
			t.Errorf("after change %d: %d slots used, want %d", n, got, st.usedSlots)
		}
		info, err := d.c.Job(ctx, wire.JobStateReq{Job: job.Job})
		if err != nil {
			t.Fatal(err)
		}
		if int(info.Size) != st.size || info.Delta != "" {
			t.Errorf("after change %d: job size %d, change in flight %q; want %d and none", n, info.Size, info.Delta, st.size)
		}

		// Every process that took part reports, once FINALIZED, the same
		// set and the same job data.
		want := st.members
		d.waitFor(job.Job, "STATE lines of "+delta, func(ls []mline) bool {
			return ranksOf(linesOf(ls, "STATE", delta)).String() == want.String()
		})
		ls := d.mlines(job.Job)
		peers := map[string]string{}
		var all wire.RankRanges
		for _, l := range linesOf(ls, "STATE", delta) {
			if l.Str("status") != wire.RCFinalized || l.Str("set") != appSet || l.Num("version") != n ||
				l.Num("epoch") != n || l.Str("members") != st.members.String() || l.Num("jobsize") != st.size {
				t.Errorf("rank %d after %s: %v", l.Rank, delta, l.Attrs)
			}
			node := l.Str("node")
			if p, ok := peers[node]; ok && p != l.Str("peers") {
				t.Errorf("rank %d on %s sees local peers %s, another process there %s", l.Rank, node, l.Str("peers"), p)
			}
			peers[node] = l.Str("peers")
		}
		for _, p := range peers {
			for _, r := range mustRanges(t, p) {
				all = all.Add(r)
			}
		}
		if all.String() != st.members.String() {
			t.Errorf("after %s: local peers over all nodes cover %s, want %s", delta, all, st.members)
		}
		switch st.typ {
		case wire.RCAdd:
			if got := ranksOf(linesOf(ls, "CONFIRMED", delta)); got.String() != st.delta.String() {
				t.Errorf("%s confirmed by %s, want %s", delta, got, st.delta)
			}
		case wire.RCSub:
			d.waitFor(job.Job, "LEFT lines", func(ls []mline) bool {
				return ranksOf(linesOf(ls, "LEFT", delta)).String() == st.delta.String()
			})
		}
	}
	last := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1})
	if last.Ranks.String() != "3" {
		t.Errorf("SUB 1 removes %s, want 3", last.Ranks)
	}
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
	}
	ls := d.mlines(job.Job)
	if got := ranksOf(linesOf(ls, "DONE", "")); got.String() != "0-2" {
		t.Errorf("DONE from %s, want 0-2", got)
	}
	if got := d.usedSlots(); got != 0 {
		t.Errorf("%d slots used after the job", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for n := 1; n <= 5; n++ {
		delta := pset.DeltaName(app, uint64(n))
		want := []string{wire.RCAnnounced, wire.RCPending, wire.RCFinalized}
		if n >= 4 {
			want = []string{wire.RCAnnounced, wire.RCFinalized} // one bound set: accepted and finalized at once
		}
		if !slices.Equal(statuses[delta], want) {
			t.Errorf("rc.state events of %s: %v, want %v", delta, statuses[delta], want)
		}
		if updates[delta] == 0 {
			t.Errorf("no rc.update event of %s (its steps and Done come as updates)", delta)
		}
	}
	rcs, err := d.c.RCs(ctx, job.Job)
	if err != nil || len(rcs) != 5 {
		t.Fatalf("rc.list: %d changes, %v", len(rcs), err)
	}
}

func mustRanges(t testing.TB, s string) []uint32 {
	t.Helper()
	var out []uint32
	for _, part := range strings.Split(s, ",") {
		var lo, hi uint32
		if _, err := fmt.Sscanf(part, "%d-%d", &lo, &hi); err != nil {
			if _, err := fmt.Sscanf(part, "%d", &lo); err != nil {
				t.Fatalf("ranks %q: %v", s, err)
			}
			hi = lo
		}
		for r := lo; r <= hi; r++ {
			out = append(out, r)
		}
	}
	return out
}

// TestRCAppRequested lets the application ask for its own changes (an
// evolving job): rank 0 requests 2→4→8→16→4, queued one after the other,
// and every process accepts blocking.
func TestRCAppRequested(t *testing.T) {
	d := startRCDVM(t, 4, 4)
	job := d.start(2, "-last", "4", "-blocking", "-requests", "add:2,add:4,add:8,sub:12")
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s\n%v", end.State, end.Code, end.Msg, d.mlines(job.Job))
	}
	rcs, err := d.c.RCs(context.Background(), job.Job)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rc := range rcs {
		got = append(got, fmt.Sprintf("%s %d %s %s %s", rc.Type, rc.N, rc.Status, rc.Requester, rc.RequesterID))
		if !rc.Settled {
			t.Errorf("%s not settled", rc.Delta)
		}
		checkTimes(t, rc)
	}
	want := []string{"ADD 2 FINALIZED app rank 0", "ADD 4 FINALIZED app rank 0", "ADD 8 FINALIZED app rank 0", "SUB 12 FINALIZED app rank 0"}
	if !slices.Equal(got, want) {
		t.Errorf("changes: %q, want %q", got, want)
	}
	ls := d.mlines(job.Job)
	if r := ranksOf(linesOf(ls, "DONE", "")); r.String() != "0-3" {
		t.Errorf("DONE from %s, want 0-3", r)
	}
	if r := ranksOf(linesOf(ls, "LEFT", "")); r.String() != "4-15" {
		t.Errorf("LEFT from %s, want 4-15", r)
	}
	if got := d.usedSlots(); got != 0 {
		t.Errorf("%d slots used after the job", got)
	}
}

// TestRCSubset binds changes to parts of the application: the program
// splits its set into a (node 0) and b (node 1), both malleable. An ADD
// bound to a is handled by a's members alone; a SUB of one process of
// each part is bound to both and needs both accepts.
func TestRCSubset(t *testing.T) {
	d := startRCDVM(t, 4, 2)
	job := d.start(4, "-split", "-last", "2")
	app := job.App
	a, b, appSet := pset.AppName(app)+"/a", pset.AppName(app)+"/b", pset.AppName(app)
	d.waitFor(job.Job, "4 SPLIT lines", func(ls []mline) bool { return count(ls, "SPLIT") == 4 })

	// The application set is inactive now: not malleable.
	_, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2, Bound: []string{appSet}})
	if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "not malleable") {
		t.Errorf("ADD bound to the inactive application set: %v", err)
	}
	if rcs, _ := d.c.RCs(context.Background(), job.Job); len(rcs) != 0 {
		t.Errorf("a refused request left %d changes", len(rcs))
	}

	var mu sync.Mutex
	var seen []string
	if _, err := d.c.Subscribe(context.Background(), wire.EventSubReq{Kinds: []string{wire.EvRCState}, Job: job.Job}, func(ev wire.Event) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %d", ev.RC.Delta, ev.RC.Status, ev.RC.Accepts))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}

	add := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2, Bound: []string{a}})
	if !slices.Equal(add.Bound, []string{a}) || add.Ranks.String() != "4-5" {
		t.Fatalf("ADD: bound %v ranks %s", add.Bound, add.Ranks)
	}
	d.waitFor(job.Job, "STATE of the ADD", func(ls []mline) bool {
		return ranksOf(linesOf(ls, "STATE", add.Delta)).String() == "0-1,4-5"
	})
	if pa := d.pset(job.Job, a); pa.Version != 1 || pa.Members.String() != "0-1,4-5" || pa.Epoch != 1 {
		t.Errorf("a after the ADD: version %d epoch %d members %s", pa.Version, pa.Epoch, pa.Members)
	}
	if pb := d.pset(job.Job, b); pb.Version != 0 || pb.Members.String() != "2-3" {
		t.Errorf("b changed by an ADD bound to a: version %d members %s", pb.Version, pb.Members)
	}
	// The inactive application set contains a, so the runtime grew it
	// with a (Definition 4).
	if pa := d.pset(job.Job, appSet); pa.Active || pa.Version != 1 || pa.Members.String() != "0-5" {
		t.Errorf("%s after the ADD: active %v version %d members %s", appSet, pa.Active, pa.Version, pa.Members)
	}

	sub := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, Ranks: wire.RangesOf([]uint32{1, 2})})
	if !slices.Equal(sub.Bound, []string{a, b}) || sub.Accepts != 2 {
		t.Fatalf("SUB: bound %v, %d accepts; want [%s %s] and 2", sub.Bound, sub.Accepts, a, b)
	}
	checkTimes(t, sub)
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
	}
	ls := d.mlines(job.Job)
	if r := ranksOf(linesOf(ls, "LEFT", sub.Delta)); r.String() != "1-2" {
		t.Errorf("LEFT from %s, want 1-2", r)
	}
	if r := ranksOf(linesOf(ls, "DONE", "")); r.String() != "0,3-5" {
		t.Errorf("DONE from %s, want 0,3-5", r)
	}
	for _, l := range linesOf(ls, "STATE", sub.Delta) {
		want := map[uint32]string{0: "0,4-5", 4: "0,4-5", 5: "0,4-5", 3: "3"}[l.Rank]
		// (The job size is not checked: processes exit as soon as they
		// have reported, and the job data follows.)
		if l.Str("members") != want {
			t.Errorf("rank %d after the SUB: %v", l.Rank, l.Attrs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// PENDING after the first accept, FINALIZED after the second.
	i := slices.Index(seen, sub.Delta+" PENDING 1")
	j := slices.Index(seen, sub.Delta+" FINALIZED 2")
	if i < 0 || j < i {
		t.Errorf("events of the SUB: %v", seen)
	}
}

// TestRCPsetOpsConcurrent has 20 processes change sets at once: 19 of them
// add themselves to and remove themselves from one shared set 10 times
// each while also rewriting a set of their own. The master serialises the
// operations: every version number is handed out once, and every daemon
// ends with the same set.
func TestRCPsetOpsConcurrent(t *testing.T) {
	const procs, toggles = 20, 10
	d := startRCDVM(t, 4, 5)
	job := d.start(procs, "-psetstress", fmt.Sprint(toggles))
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s\n%v", end.State, end.Code, end.Msg, d.mlines(job.Job))
	}
	ls := d.mlines(job.Job)
	seen := map[int]uint32{}
	for _, l := range linesOf(ls, "OPS", "") {
		if l.Str("versions") == "" {
			continue
		}
		for _, v := range strings.Split(l.Str("versions"), ",") {
			var n int
			fmt.Sscanf(v, "%d", &n)
			if r, dup := seen[n]; dup {
				t.Errorf("version %d handed to ranks %d and %d", n, r, l.Rank)
			}
			seen[n] = l.Rank
		}
	}
	total := (procs - 1) * toggles
	for v := 1; v <= total; v++ {
		if _, ok := seen[v]; !ok {
			t.Errorf("no operation got version %d", v)
		}
	}
	if len(seen) != total {
		t.Errorf("%d versions, want %d", len(seen), total)
	}
	fin := linesOf(ls, "FINAL", "")
	if len(fin) != procs {
		t.Fatalf("%d FINAL lines", len(fin))
	}
	for _, l := range fin {
		if l.Num("version") != total || l.Str("members") != "0" {
			t.Errorf("rank %d on %s sees the shared set at version %d with %s; want %d with 0", l.Rank, l.Str("node"), l.Num("version"), l.Str("members"), total)
		}
	}
}

// TestRCAborts runs every way a change is aborted on one DVM: the new
// processes never confirm (timeout), cannot be started (the program is
// gone), die before confirming, or the change is canceled. Each time the
// running processes learn ABORTED (from their accept, or their query) and
// see the job data as before, the new processes are gone and their slots
// free, and the job goes on: a SUB then ends it. Afterwards a change
// succeeds.
func TestRCAborts(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	ctx := context.Background()
	check := func(name string, job wire.JobLaunchReply, reason string) {
		t.Helper()
		delta := pset.DeltaName(job.App, 1)
		rc, err := d.c.RC(ctx, delta)
		if err != nil || rc.Status != wire.RCAborted || !strings.Contains(rc.Reason, reason) || !rc.Settled || rc.Times.Exited == 0 {
			t.Errorf("%s: %+v, %v; want ABORTED (%q), settled", name, rc, err, reason)
		}
		d.waitFor(job.Job, "STATE lines of "+delta, func(ls []mline) bool {
			return ranksOf(linesOf(ls, "STATE", delta)).String() == "0-1"
		})
		for _, l := range linesOf(d.mlines(job.Job), "STATE", delta) {
			if l.Str("status") != wire.RCAborted || l.Num("jobsize") != 2 || l.Str("peers") != "0-1" {
				t.Errorf("%s: rank %d saw %v", name, l.Rank, l.Attrs)
			}
		}
		info, err := d.c.Job(ctx, wire.JobStateReq{Job: job.Job, Procs: true})
		if err != nil {
			t.Fatal(err)
		}
		if info.State != wire.JobStateRunning || info.Size != 2 || info.NextRank != 2 {
			t.Errorf("%s: job %s size %d next rank %d; want running, 2, 2 (an abort gives its ranks back)", name, info.State, info.Size, info.NextRank)
		}
		for _, p := range info.Procs[2:] {
			if p.State == wire.ProcStateRunning || p.State == wire.ProcStateLaunching {
				t.Errorf("%s: new rank %d still %s", name, p.Rank, p.State)
			}
		}
		if n := d.usedSlots(); n != 2 {
			t.Errorf("%s: %d slots used, want 2", name, n)
		}
		// Phase 2 may have put the new ranks in the application set; the
		// abort takes them out again.
		if as := d.pset(job.Job, pset.AppName(job.App)); as.Members.String() != "0-1" {
			t.Errorf("%s: application set holds %s after the abort", name, as.Members)
		}
		d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1}) // change 2 ends the program
		if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
			t.Errorf("%s: job ended %s code %d: %s", name, end.State, end.Code, end.Msg)
		}
	}

	t.Run("timeout", func(t *testing.T) {
		job := d.start(2, "-last", "2", "-no-confirm")
		_, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2, ConfirmMS: 1000})
		if !errors.Is(err, wire.ErrAborted) {
			t.Fatalf("ADD without confirmation: %v", err)
		}
		check("timeout", job, "not confirmed within 1s")
	})
	t.Run("exec", func(t *testing.T) {
		prog := t.TempDir() + "/malleable"
		copyFile(t, d.mall, prog)
		job := d.startProg(prog, 2, "-last", "2")
		removeFile(t, prog)
		_, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
		if !errors.Is(err, wire.ErrAborted) {
			t.Fatalf("ADD of a missing program: %v", err)
		}
		check("exec", job, "could not start")
	})
	t.Run("death", func(t *testing.T) {
		job := d.start(2, "-last", "2", "-die-new", "3")
		_, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
		if !errors.Is(err, wire.ErrAborted) {
			t.Fatalf("ADD whose processes die: %v", err)
		}
		check("death", job, "exited with code 3 before confirming")
	})
	t.Run("cancel", func(t *testing.T) {
		job := d.start(2, "-last", "2", "-no-confirm")
		rc, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
		if err != nil || rc.Status != wire.RCAnnounced {
			t.Fatalf("ADD: %s, %v", rc.Status, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := d.c.WaitRC(wctx, rc.Delta, wire.RCPending); err != nil {
			t.Fatalf("wait for PENDING: %v", err)
		}
		if _, err := d.c.CancelRC(ctx, rc.Delta, "test cancels"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.c.CancelRC(ctx, rc.Delta, "again"); !errors.Is(err, wire.ErrState) {
			t.Errorf("second cancel: %v", err)
		}
		if _, err := d.c.WaitRC(wctx, rc.Delta, ""); !errors.Is(err, wire.ErrAborted) {
			t.Errorf("wait for the canceled change: %v", err)
		}
		check("cancel", job, "test cancels")
	})
	t.Run("usable", func(t *testing.T) {
		job := d.start(2, "-last", "1")
		rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 6})
		if rc.Ranks.String() != "2-7" {
			t.Errorf("ADD 6: ranks %s", rc.Ranks)
		}
		if end := d.wait(job.Job); end.State != wire.JobStateDone {
			t.Errorf("job ended %s: %s", end.State, end.Msg)
		}
	})
}

// TestRCSubEnforced: the processes a SUB removes stay (and ignore
// SIGTERM); after the grace period the runtime kills them, records it,
// and frees their slots.
func TestRCSubEnforced(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	job := d.start(4, "-last", "2", "-linger")
	rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 2, GraceMS: 100})
	checkTimes(t, rc)
	if rc.Ranks.String() != "2-3" || rc.Times.Enforced == 0 || rc.Times.Enforced < rc.Times.Finalized+int64(100*time.Millisecond) || rc.Times.Exited < rc.Times.Enforced {
		t.Errorf("SUB: ranks %s times %+v", rc.Ranks, rc.Times)
	}
	if n := d.usedSlots(); n != 2 {
		t.Errorf("%d slots used, want 2", n)
	}
	d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1, GraceMS: 100}) // the program ends after it
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
	}
	info, _ := d.c.Job(context.Background(), wire.JobStateReq{Job: job.Job, Procs: true})
	for _, p := range info.Procs[2:4] {
		if p.State != wire.ProcStateKilled {
			t.Errorf("rank %d: %s, want killed", p.Rank, p.State)
		}
	}
}
