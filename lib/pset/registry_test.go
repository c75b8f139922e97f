package pset

import (
	"maps"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestNew(t *testing.T) {
	r := mustNew(t, "job1", []uint32{0, 1, 2, 5, 9}) // holes are fine
	for _, name := range []string{"mpi://WORLD", "mpi://world", "mpi://app/job1"} {
		in, err := r.Get(name, Latest)
		if err != nil {
			t.Fatal(err)
		}
		if in.Size != 5 || in.Version != 0 || in.Epoch != 0 || !in.Active || in.Sched != nil || in.Newest != 0 {
			t.Errorf("%s: %+v", name, in)
		}
		wantMembers(t, r, name, []uint32{0, 1, 2, 5, 9})
	}
	if r.App() != "job1" || len(r.List()) != 2 {
		t.Errorf("app %q, list %+v", r.App(), r.List())
	}

	_, err := New("bad/app", []uint32{1})
	wantErr(t, err, wire.ErrInvalid, `"bad/app"`)
	_, err = New("", []uint32{1})
	wantErr(t, err, wire.ErrInvalid, "invalid application name")
	_, err = New("ok", nil)
	wantErr(t, err, wire.ErrInvalid, "no initial processes")
}

func TestGetErrors(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 4))
	cases := []struct {
		name     string
		v        int
		sentinel *wire.Error
		frag     string
	}{
		{"mpi://app/a/x", Latest, wire.ErrNotFound, "mpi://app/a/x not found"},
		{"mpi://app/b", Latest, wire.ErrNotFound, `application "b"`},
		{"mpi://rte/a/rc/1", Latest, wire.ErrNotFound, "not found"},
		{"mpi://SELF", Latest, wire.ErrInvalid, "differs per process"},
		{"mpi://SHARED", Latest, wire.ErrInvalid, "differs per process"},
		{"mpi://app/a", 1, wire.ErrNotFound, "no version 1"},
		{"mpi://app/a@1", Latest, wire.ErrNotFound, "no version 1"},
		{"mpi://app/a@0", 2, wire.ErrInvalid, "names version 0"},
		{"mpi://app/a", -2, wire.ErrInvalid, "invalid version -2"},
		{"app/a", Latest, wire.ErrInvalid, "missing mpi:// scheme"},
	}
	for _, c := range cases {
		_, err := r.Get(c.name, c.v)
		wantErr(t, err, c.sentinel, c.frag)
	}
	if in, err := r.Get("mpi://app/a@0", 0); err != nil || in.Version != 0 {
		t.Errorf("Get with matching versions: %+v, %v", in, err)
	}
	_, err := r.Members("mpi://app/a/x")
	wantErr(t, err, wire.ErrNotFound)
	_, err = r.Bitmap("mpi://app/a/x")
	wantErr(t, err, wire.ErrNotFound)
}

func TestBitmapIsACopy(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 4))
	bm, err := r.Bitmap("mpi://app/a")
	if err != nil {
		t.Fatal(err)
	}
	bm.Add(100)
	wantMembers(t, r, "mpi://app/a", ranges(0, 4))
	wantMembers(t, r, "mpi://WORLD", ranges(0, 4))
}

// TestEpochs checks Definition 1: deltas get 1, 2, 3, ...; an operation's
// result takes the larger epoch of its operands; a set whose members do
// not change keeps version and epoch.
func TestEpochs(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 8))
	for i := 1; i <= 3; i++ {
		d := mustDelta(t, r, []uint32{uint32(10 + i)})
		if d.Epoch != i || d.Version != 0 || d.Name != DeltaName("a", uint64(i)) || d.Kind != KindDelta || d.Size != 1 {
			t.Errorf("delta %d = %+v", i, d)
		}
	}
	put(t, r, "mpi://app/a/x", []uint32{1, 2}, true)
	steps := []struct {
		req       OpRequest
		epoch     int
		version   int
		changed   bool
		createdAs string
	}{
		// Two epoch-0 sets: epoch 0.
		{OpRequest{Op: OpUnion, P1: "mpi://app/a/x", P2: "mpi://WORLD", Target: "mpi://app/a/y"}, 0, 0, true, "y"},
		// With delta 2: epoch 2.
		{OpRequest{Op: OpUnion, P1: "mpi://app/a/y", P2: "mpi://rte/a/rc/2", Target: "mpi://app/a/y"}, 2, 1, true, ""},
		// Delta 3 as the first operand: max again.
		{OpRequest{Op: OpDifference, P1: "mpi://rte/a/rc/3", P2: "mpi://app/a/x", Target: "mpi://app/a/z"}, 3, 0, true, "z"},
		// y (epoch 2) minus an epoch-0 set: 2.
		{OpRequest{Op: OpDifference, P1: "mpi://app/a/y", P2: "mpi://app/a/x", Target: "mpi://app/a/y"}, 2, 2, true, ""},
		// Same members as before: no new version, epoch stays 2 although
		// delta 3 took part.
		{OpRequest{Op: OpDifference, P1: "mpi://app/a/y", P2: "mpi://rte/a/rc/3", Target: "mpi://app/a/y"}, 2, 2, false, ""},
	}
	for i, s := range steps {
		res := mustOp(t, r, s.req)
		if res.Result.Epoch != s.epoch || res.Result.Version != s.version || res.Changed != s.changed || res.Created != (s.createdAs != "") {
			t.Errorf("step %d: %+v", i, res)
		}
	}
	if d := mustDelta(t, r, []uint32{20}); d.Epoch != 4 || d.Name != "mpi://rte/a/rc/4" {
		t.Errorf("fourth delta = %+v", d)
	}
	_, err := r.DefineDelta(nil)
	wantErr(t, err, wire.ErrInvalid, "no members")
}

func TestDeleteAndPin(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 8))
	put(t, r, "mpi://app/a/x", ranges(0, 4), true)
	d := mustDelta(t, r, []uint32{7}).Name

	for _, name := range []string{"mpi://WORLD", "mpi://app/a", d} {
		wantErr(t, r.Delete(name), wire.ErrPermission, "only sets created by the application")
	}
	wantErr(t, r.Delete("mpi://app/a/none"), wire.ErrNotFound, "mpi://app/a/none")
	wantErr(t, r.Delete("mpi://app/a/x@0"), wire.ErrInvalid, "character '@'")
	wantErr(t, r.Delete("mpi://SELF"), wire.ErrInvalid)

	// Two pins need two unpins.
	for range 2 {
		if err := r.Pin("mpi://app/a/x"); err != nil {
			t.Fatal(err)
		}
	}
	if in, _ := r.Get("mpi://app/a/x", Latest); in.Pins != 2 {
		t.Errorf("pins = %d", in.Pins)
	}
	wantErr(t, r.Delete("mpi://app/a/x"), wire.ErrBusy, "mpi://app/a/x", "pinned by 2")
	_, err := r.PruneVersions("mpi://app/a/x", 5)
	wantErr(t, err, wire.ErrBusy, "cannot prune mpi://app/a/x")
	if err := r.Unpin("mpi://app/a/x"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.Delete("mpi://app/a/x"), wire.ErrBusy, "pinned by 1")
	if err := r.Unpin("mpi://app/a/x@0"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.Unpin("mpi://app/a/x"), wire.ErrState, "not pinned")
	wantErr(t, r.Pin("mpi://app/a/x@3"), wire.ErrNotFound, "no version 3")
	wantErr(t, r.Pin("mpi://app/a/none"), wire.ErrNotFound)

	// Build versions 0..2, delete, and create the name again: numbering
	// continues so (x, 0) never names another membership.
	mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/x", P2: d, Target: "mpi://app/a/x"})
	mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/x", P2: d, Target: "mpi://app/a/x"})
	if err := r.Delete("mpi://app/a/x"); err != nil {
		t.Fatal(err)
	}
	_, err = r.Get("mpi://app/a/x", Latest)
	wantErr(t, err, wire.ErrNotFound, "was deleted")
	wantErr(t, r.Delete("mpi://app/a/x"), wire.ErrNotFound, "was deleted")
	res := mustOp(t, r, OpRequest{Op: OpIntersection, P1: "mpi://WORLD", P2: d, Target: "mpi://app/a/x"})
	if !res.Created || res.Result.Version != 3 || res.Result.Oldest != 3 {
		t.Errorf("recreated = %+v", res)
	}
	_, err = r.Get("mpi://app/a/x", 0)
	wantErr(t, err, wire.ErrNotFound, "pruned")
	wantMembers(t, r, "mpi://app/a/x@3", []uint32{7})
}

func TestPruneVersions(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/x", []uint32{0}, true)
	for i := uint32(1); i < 5; i++ { // versions 1..4 = {0..i}
		put(t, r, "mpi://app/a/x", ranges(0, i+1), true)
	}
	n, err := r.PruneVersions("mpi://app/a/x", 3)
	if err != nil || n != 3 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	for v := range 3 {
		_, err := r.Get("mpi://app/a/x", v)
		wantErr(t, err, wire.ErrNotFound, "was pruned")
	}
	wantMembers(t, r, "mpi://app/a/x@3", ranges(0, 4))
	wantMembers(t, r, "mpi://app/a/x@4", ranges(0, 5))
	// The newest version always stays, and pruning again is a no-op.
	if n, err := r.PruneVersions("mpi://app/a/x", 100); err != nil || n != 1 {
		t.Errorf("prune all: %d, %v", n, err)
	}
	if n, err := r.PruneVersions("mpi://app/a/x", 2); err != nil || n != 0 {
		t.Errorf("prune again: %d, %v", n, err)
	}
	if in, _ := r.Get("mpi://app/a/x", Latest); in.Version != 4 || in.Oldest != 4 || in.Size != 5 {
		t.Errorf("after prune: %+v", in)
	}
	if n, err := r.PruneVersions("mpi://WORLD", 10); err != nil || n != 0 {
		t.Errorf("prune WORLD: %d, %v", n, err)
	}
	_, err = r.PruneVersions("mpi://app/a/none", 1)
	wantErr(t, err, wire.ErrNotFound)
}

func TestListIsSortedAndDetached(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 4))
	mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://WORLD", P2: "mpi://WORLD", Target: "mpi://app/a/z", Sched: map[string]string{"mpi_ps_sched_x": "1"}})
	mustDelta(t, r, []uint32{9})
	l := r.List()
	var got []string
	for _, in := range l {
		got = append(got, in.Name)
	}
	want := []string{"mpi://WORLD", "mpi://app/a", "mpi://app/a/z", "mpi://rte/a/rc/1"}
	if len(got) != len(want) {
		t.Fatalf("list = %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("list = %q, want %q", got, want)
		}
	}
	l[2].Sched["mpi_ps_sched_x"] = "changed"
	if in, _ := r.Get("mpi://app/a/z", Latest); !maps.Equal(in.Sched, map[string]string{"mpi_ps_sched_x": "1"}) {
		t.Errorf("Info.Sched aliases the registry: %v", in.Sched)
	}
}
