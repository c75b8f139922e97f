package pset

import (
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestRestore: an aborted change gives its ranks back the membership they
// had before it, in every application-domain set, whatever phase 2 did;
// ranks that died meanwhile are taken out instead.
func TestRestore(t *testing.T) {
	const app = "mpi://app/a"
	cases := []struct {
		name    string
		before  func(*Registry)       // sets before the change
		delta   []uint32              // ranks of the change
		phase2  func(*Registry, Info) // what the application did
		gone    []uint32
		want    map[string][]uint32 // latest members afterwards
		deleted []string
	}{
		{
			name:  "SUB difference undone, inactive superset too",
			delta: []uint32{4, 5},
			before: func(r *Registry) {
				mustOp(t, r, OpRequest{Op: OpUnion, P1: app, P2: app, Target: app + "/all", Active: ptr(false)})
			},
			phase2: func(r *Registry, d Info) {
				mustOp(t, r, OpRequest{Op: OpDifference, P1: app, P2: d.Name, Target: app})
			},
			want: map[string][]uint32{app: ranges(0, 6), app + "/all": ranges(0, 6)},
		},
		{
			name:  "SUB undone but a dead member stays out",
			delta: []uint32{4, 5},
			phase2: func(r *Registry, d Info) {
				mustOp(t, r, OpRequest{Op: OpDifference, P1: app, P2: d.Name, Target: app})
			},
			gone: []uint32{5, 1},
			want: map[string][]uint32{app: {0, 2, 3, 4}},
		},
		{
			name:  "ADD union undone, new set of new ranks deleted",
			delta: []uint32{6, 7},
			phase2: func(r *Registry, d Info) {
				mustOp(t, r, OpRequest{Op: OpUnion, P1: app, P2: d.Name, Target: app})
				mustOp(t, r, OpRequest{Op: OpUnion, P1: d.Name, P2: d.Name, Target: app + "/new"})
			},
			want:    map[string][]uint32{app: ranges(0, 6)},
			deleted: []string{app + "/new"},
		},
		{
			name:   "nothing done, nothing changed",
			delta:  []uint32{3},
			phase2: func(*Registry, Info) {},
			want:   map[string][]uint32{app: ranges(0, 6)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustNew(t, "a", ranges(0, 6))
			if c.before != nil {
				c.before(r)
			}
			vers := map[string]int{}
			for _, in := range r.List() {
				vers[in.Name] = in.Version
			}
			snap := r.Snapshot(c.delta)
			d := mustDelta(t, r, c.delta)
			c.phase2(r, d)
			changed, deleted := r.Restore(snap, c.gone)
			for name, want := range c.want {
				wantMembers(t, r, name, want)
			}
			if !slices.Equal(deleted, c.deleted) {
				t.Errorf("deleted %v, want %v", deleted, c.deleted)
			}
			for _, in := range changed {
				if in.Version <= vers[in.Name] && vers[in.Name] != 0 {
					t.Errorf("%s: restored as version %d, not a new one after %d", in.Name, in.Version, vers[in.Name])
				}
			}
			// Restoring twice changes nothing more.
			if again, del := r.Restore(snap, c.gone); len(again)+len(del) != 0 {
				t.Errorf("second restore changed %v, deleted %v", again, del)
			}
		})
	}
}

// TestDropRanks: dead ranks leave every application-domain set, with a new
// version each; WORLD and delta sets are records and keep them.
func TestDropRanks(t *testing.T) {
	const app = "mpi://app/a"
	r := mustNew(t, "a", ranges(0, 4))
	mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://SELF", P2: "mpi://SELF", Target: app + "/one", Caller: &Caller{Rank: 3}})
	d := mustDelta(t, r, []uint32{3})
	got := r.DropRanks([]uint32{3})
	var names []string
	for _, in := range got {
		names = append(names, in.Name)
	}
	if !slices.Equal(names, []string{app, app + "/one"}) {
		t.Errorf("changed %v", names)
	}
	wantMembers(t, r, app, ranges(0, 3))
	wantMembers(t, r, app+"/one", nil)
	wantMembers(t, r, NameWorld, ranges(0, 4))
	wantMembers(t, r, d.Name, []uint32{3})
	if in, _ := r.Get(app, Latest); in.Version != 1 || in.Epoch != 0 {
		t.Errorf("%s after the drop: %+v", app, in)
	}
	if again := r.DropRanks([]uint32{3}); len(again) != 0 {
		t.Errorf("second drop changed %v", again)
	}
}

// TestRetention: PruneAll keeps the newest versions of unpinned sets;
// ForgetDelta drops a settled change's delta set for good.
func TestRetention(t *testing.T) {
	const app = "mpi://app/a"
	r := mustNew(t, "a", ranges(0, 2))
	for i := range 20 {
		d := mustDelta(t, r, []uint32{uint32(2 + i)})
		mustOp(t, r, OpRequest{Op: OpUnion, P1: app, P2: d.Name, Target: app})
	}
	if err := r.Pin(app + "/x"); err == nil {
		t.Fatal("pinned a set that does not exist")
	}
	before, _ := r.Versions()
	if n := r.PruneAll(4); n != 17 {
		t.Errorf("pruned %d versions, want 17 (21 versions, keep 4)", n)
	}
	after, sets := r.Versions()
	if after != before-17 || sets != 22 {
		t.Errorf("versions %d → %d, sets %d", before, after, sets)
	}
	if _, err := r.Get(app, 17); err != nil {
		t.Errorf("a kept version: %v", err)
	}
	_, err := r.Get(app, 16)
	wantErr(t, err, wire.ErrNotFound, "pruned")

	first := DeltaName("a", 1)
	if err := r.ForgetDelta(first); err != nil {
		t.Fatal(err)
	}
	_, err = r.Get(first, Latest)
	wantErr(t, err, wire.ErrNotFound, "forgotten")
	wantErr(t, r.ForgetDelta(app), wire.ErrInvalid, "not a delta")
	last := DeltaName("a", 20)
	if err := r.Pin(last); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.ForgetDelta(last), wire.ErrBusy, "pinned")
	if d := mustDelta(t, r, []uint32{99}); d.Name != DeltaName("a", 21) {
		t.Errorf("numbering after a forget: %s", d.Name)
	}
}

// A REPLACE's second delta set (/out) belongs to the latest delta: same
// epoch, defined once, forgotten with its delta and not alone.
func TestDefineReplaced(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 3))
	_, err := r.DefineReplaced([]uint32{1})
	wantErr(t, err, wire.ErrState, "no delta set defined yet")
	d := mustDelta(t, r, []uint32{4})
	out, err := r.DefineReplaced([]uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	if out.Name != OutName("a", 1) || out.Epoch != d.Epoch || out.Size != 1 {
		t.Errorf("replaced set %+v, delta %+v", out, d)
	}
	_, err = r.DefineReplaced([]uint32{2})
	wantErr(t, err, wire.ErrState, "already defined")
	_, err = r.DefineReplaced(nil)
	wantErr(t, err, wire.ErrInvalid, "no members")
	wantErr(t, r.ForgetDelta(out.Name), wire.ErrInvalid, "goes with")
	if err := r.ForgetDelta(d.Name); err != nil {
		t.Fatal(err)
	}
	_, err = r.Get(out.Name, Latest)
	wantErr(t, err, wire.ErrNotFound, "forgotten")
}
