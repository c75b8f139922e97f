package pset

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestOpBasics(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/lo", ranges(0, 6), true)
	put(t, r, "mpi://app/a/hi", ranges(4, 10), true)
	cases := []struct {
		op   Op
		want []uint32
	}{
		{OpUnion, ranges(0, 10)},
		{OpDifference, ranges(0, 4)},
		{OpIntersection, []uint32{4, 5}},
	}
	for _, c := range cases {
		res := mustOp(t, r, OpRequest{Op: c.op, P1: "mpi://app/a/lo", P2: "mpi://app/a/hi"})
		if !res.Created || !res.Changed || res.Result.Version != 0 || res.Result.Kind != KindApp ||
			!strings.HasPrefix(res.Result.Name, "mpi://app/a/pset-") || res.Result.Size != len(c.want) {
			t.Errorf("%s: %+v", c.op, res)
		}
		wantMembers(t, r, res.Result.Name, c.want)
	}
	// Generated names are unique and skip names the application took.
	put(t, r, "mpi://app/a/pset-4", []uint32{1}, true)
	res := mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/lo", P2: "mpi://app/a/hi"})
	if res.Result.Name != "mpi://app/a/pset-5" {
		t.Errorf("generated %s, want pset-5", res.Result.Name)
	}
}

func TestOpTargets(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/x", ranges(0, 6), true)
	put(t, r, "mpi://app/a/other", []uint32{9}, false)
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a/other", Sched: map[string]string{"mpi_ps_sched_k": "own"}})

	// Target = P1: new version of P1.
	res := mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/x", P2: "mpi://app/a/other", Target: "mpi://app/a/x"})
	if res.Created || res.Changed || res.Result.Version != 0 {
		t.Errorf("unchanged members must not make a version: %+v", res)
	}
	res = mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/x", P2: "mpi://app/a/other", Target: "mpi://app/a/x"})
	if res.Created || !res.Changed || res.Result.Version != 1 || res.Result.Newest != 1 {
		t.Errorf("target = P1: %+v", res)
	}
	wantMembers(t, r, "mpi://app/a/x@0", ranges(0, 6))
	wantMembers(t, r, "mpi://app/a/x", append(ranges(0, 6), 9))

	// An old version as operand, written back as a new version.
	res = mustOp(t, r, OpRequest{Op: OpIntersection, P1: "mpi://app/a/x@0", P2: "mpi://WORLD", Target: "mpi://app/a/x"})
	if res.Result.Version != 2 {
		t.Errorf("from x@0: %+v", res)
	}
	wantMembers(t, r, "mpi://app/a/x", ranges(0, 6))

	// Target = another existing set: new version of it, keeping its own
	// attributes (inactive, its hint) rather than P1's.
	res = mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/x", P2: "mpi://app/a/other", Target: "mpi://app/a/other"})
	if res.Created || !res.Changed || res.Result.Version != 1 || res.Result.Active || res.Result.Sched["mpi_ps_sched_k"] != "own" {
		t.Errorf("existing target: %+v", res)
	}

	// The root set is writable: the application-level flow updates it.
	d := mustDelta(t, r, []uint32{8, 9}).Name
	res = mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a", P2: d, Target: "mpi://app/a"})
	if res.Result.Version != 1 || res.Result.Epoch != 1 || res.Result.Size != 8 {
		t.Errorf("root: %+v", res)
	}
	wantMembers(t, r, "mpi://WORLD", ranges(0, 10))
}

func TestOpErrors(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/x", ranges(0, 4), true)
	put(t, r, "mpi://app/a/y", ranges(6, 8), true)
	d := mustDelta(t, r, []uint32{20}).Name
	x, y := "mpi://app/a/x", "mpi://app/a/y"
	cases := []struct {
		name     string
		req      OpRequest
		sentinel *wire.Error
		frags    []string
	}{
		{"empty intersection", OpRequest{Op: OpIntersection, P1: x, P2: y}, wire.ErrInvalid, []string{"INTERSECTION(mpi://app/a/x, mpi://app/a/y) has no members"}},
		{"empty difference", OpRequest{Op: OpDifference, P1: x, P2: "mpi://WORLD"}, wire.ErrInvalid, []string{"DIFFERENCE(", "cannot be empty"}},
		{"unknown p1", OpRequest{Op: OpUnion, P1: "mpi://app/a/q", P2: y}, wire.ErrNotFound, []string{"mpi://app/a/q"}},
		{"unknown p2", OpRequest{Op: OpUnion, P1: x, P2: "mpi://rte/a/rc/9"}, wire.ErrNotFound, []string{"mpi://rte/a/rc/9"}},
		{"missing p2", OpRequest{Op: OpUnion, P1: x}, wire.ErrInvalid, []string{"second operand missing"}},
		{"bad p1 name", OpRequest{Op: OpUnion, P1: "mpi://app/a/", P2: y}, wire.ErrInvalid, []string{`"mpi://app/a/"`}},
		{"missing version", OpRequest{Op: OpUnion, P1: x + "@4", P2: y}, wire.ErrNotFound, []string{"no version 4"}},
		{"other app operand", OpRequest{Op: OpUnion, P1: "mpi://app/b/x", P2: y}, wire.ErrNotFound, []string{`application "b"`}},
		{"target WORLD", OpRequest{Op: OpUnion, P1: x, P2: y, Target: "mpi://WORLD"}, wire.ErrPermission, []string{"read-only"}},
		{"target SELF", OpRequest{Op: OpUnion, P1: x, P2: y, Target: "mpi://SELF"}, wire.ErrPermission, []string{"read-only"}},
		{"target delta", OpRequest{Op: OpUnion, P1: x, P2: y, Target: d}, wire.ErrPermission, []string{"mpi://app/a domain"}},
		{"target other app", OpRequest{Op: OpUnion, P1: x, P2: y, Target: "mpi://app/b/z"}, wire.ErrPermission, []string{`application "b"`}},
		{"target bad", OpRequest{Op: OpUnion, P1: x, P2: y, Target: "z"}, wire.ErrInvalid, []string{"mpi:// scheme"}},
		{"bad hint key", OpRequest{Op: OpUnion, P1: x, P2: y, Sched: map[string]string{"prio": "1"}}, wire.ErrInvalid, []string{`"prio"`, "mpi_ps_sched_"}},
		{"bare hint prefix", OpRequest{Op: OpUnion, P1: x, P2: y, Sched: map[string]string{"mpi_ps_sched_": "1"}}, wire.ErrInvalid, []string{"mpi_ps_sched_<name>"}},
		{"hint value too long", OpRequest{Op: OpUnion, P1: x, P2: y, Sched: map[string]string{"mpi_ps_sched_v": strings.Repeat("v", MaxSchedValLen+1)}}, wire.ErrInvalid, []string{"longer than 1024"}},
		{"SELF without caller", OpRequest{Op: OpUnion, P1: "mpi://SELF", P2: y}, wire.ErrInvalid, []string{"mpi://SELF depends on the calling process"}},
		{"unknown op", OpRequest{Op: Op(9), P1: x, P2: y}, wire.ErrInvalid, []string{"unknown process set operation 9"}},
		{"null without target", OpRequest{Op: OpNull}, wire.ErrInvalid, []string{"needs a target"}},
		{"null missing target", OpRequest{Op: OpNull, Target: "mpi://app/a/q"}, wire.ErrNotFound, []string{"mpi://app/a/q"}},
		{"null on WORLD", OpRequest{Op: OpNull, Target: "mpi://WORLD", Active: ptr(false)}, wire.ErrPermission, []string{"read-only"}},
	}
	before := r.List()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.ApplyOp(c.req)
			wantErr(t, err, c.sentinel, c.frags...)
		})
	}
	if after := r.List(); !slices.EqualFunc(before, after, infoEqual) {
		t.Errorf("failed operations changed the registry:\n%+v\n%+v", before, after)
	}
}

func infoEqual(a, b Info) bool { return reflect.DeepEqual(a, b) }

func TestOpAttributes(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/p1", ranges(0, 5), false)
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a/p1", Sched: map[string]string{"mpi_ps_sched_opt": "128", "mpi_ps_sched_poll": "1s"}})

	// Inherited from P1 when not given.
	res := mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/p1", P2: "mpi://WORLD", Target: "mpi://app/a/c1"})
	if res.Result.Active || !maps.Equal(res.Result.Sched, map[string]string{"mpi_ps_sched_opt": "128", "mpi_ps_sched_poll": "1s"}) {
		t.Errorf("inherited: %+v", res.Result)
	}
	// Given values win key by key; "" drops an inherited key.
	res = mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/p1", P2: "mpi://WORLD", Target: "mpi://app/a/c2",
		Active: ptr(true), Sched: map[string]string{"mpi_ps_sched_opt": "64", "mpi_ps_sched_poll": "", "mpi_ps_sched_new": "x"}})
	if !res.Result.Active || !maps.Equal(res.Result.Sched, map[string]string{"mpi_ps_sched_opt": "64", "mpi_ps_sched_new": "x"}) {
		t.Errorf("overridden: %+v", res.Result)
	}
	// NULL changes attributes only: no version, same members, P1/P2 ignored.
	res = mustOp(t, r, OpRequest{Op: OpNull, P1: "ignored", P2: "ignored too", Target: "mpi://app/a/c2", Active: ptr(false), Sched: map[string]string{"mpi_ps_sched_new": ""}})
	if res.Created || res.Changed || res.Result.Version != 0 || res.Result.Active || !maps.Equal(res.Result.Sched, map[string]string{"mpi_ps_sched_opt": "64"}) {
		t.Errorf("null: %+v", res)
	}
	// The root set's attributes can be changed too (fig. 6.1 marks it
	// inactive).
	res = mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a", Active: ptr(false)})
	if res.Result.Active || res.Result.Version != 0 {
		t.Errorf("null on root: %+v", res)
	}
	// Too many hints in total.
	many := map[string]string{}
	for i := range MaxSchedKeys {
		many["mpi_ps_sched_k"+strings.Repeat("x", i)] = "v"
	}
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a", Sched: many})
	_, err := r.ApplyOp(OpRequest{Op: OpNull, Target: "mpi://app/a", Sched: map[string]string{"mpi_ps_sched_one_more": "v"}})
	wantErr(t, err, wire.ErrInvalid, "at most 64 scheduling hints")
	_, err = r.ApplyOp(OpRequest{Op: OpNull, Target: "mpi://app/a/c1", Sched: many})
	wantErr(t, err, wire.ErrInvalid, "at most 64 scheduling hints") // c1 holds two more
	many["mpi_ps_sched_extra"] = "v"
	_, err = r.ApplyOp(OpRequest{Op: OpNull, Target: "mpi://app/a", Sched: many})
	wantErr(t, err, wire.ErrInvalid, "65 scheduling hints given")
}

func TestSelfAndShared(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 8))
	c := &Caller{Rank: 3, NodePeers: []uint32{2, 3}}
	res := mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://SELF", P2: "mpi://shared", Caller: c, Target: "mpi://app/a/node"})
	if res.Result.Epoch != 0 || !res.Result.Active {
		t.Errorf("%+v", res)
	}
	wantMembers(t, r, "mpi://app/a/node", []uint32{2, 3})
	res = mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://WORLD", P2: "mpi://SELF@0", Caller: c})
	wantMembers(t, r, res.Result.Name, []uint32{0, 1, 2, 4, 5, 6, 7})
	_, err := r.ApplyOp(OpRequest{Op: OpUnion, P1: "mpi://SELF@1", P2: "mpi://WORLD", Caller: c})
	wantErr(t, err, wire.ErrNotFound, "only version 0")
}

// TestRecursion: an op with a delta as second operand carries over to the
// inactive sets of Definition 4.
func TestRecursion(t *testing.T) {
	// Root inactive and mirrored by one active working set; an inactive
	// strict superset of part of it, an inactive set elsewhere, and an
	// active superset that the runtime must not touch.
	setup := func(t *testing.T) *Registry {
		r := mustNew(t, "a", ranges(0, 8))
		mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a", Active: ptr(false)})
		put(t, r, "mpi://app/a/work", ranges(0, 8), true)
		put(t, r, "mpi://app/a/half", ranges(0, 4), true)
		put(t, r, "mpi://app/a/halfplus", ranges(0, 5), false)
		put(t, r, "mpi://app/a/tail", []uint32{6, 7}, false)
		put(t, r, "mpi://app/a/activesuper", ranges(0, 6), true)
		return r
	}

	t.Run("add", func(t *testing.T) {
		r := setup(t)
		d := mustDelta(t, r, []uint32{8, 9}).Name
		res := mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/half", P2: d, Target: "mpi://app/a/half"})
		// Supersets of half that are inactive: root, halfplus (work and
		// activesuper are active; tail does not contain half).
		if got := infoNames(res.Affected); !slices.Equal(got, []string{"mpi://app/a", "mpi://app/a/halfplus"}) {
			t.Fatalf("affected = %q", got)
		}
		for _, in := range res.Affected {
			if in.Version != 1 || in.Epoch != 1 || in.Active {
				t.Errorf("affected %+v", in)
			}
		}
		wantMembers(t, r, "mpi://app/a", ranges(0, 10))
		wantMembers(t, r, "mpi://app/a/halfplus", append(ranges(0, 5), 8, 9))
		wantMembers(t, r, "mpi://app/a/work", ranges(0, 8))
		wantMembers(t, r, "mpi://app/a/activesuper", ranges(0, 6))
		wantMembers(t, r, "mpi://app/a/tail", []uint32{6, 7})
	})

	t.Run("add equal mirror", func(t *testing.T) {
		r := setup(t)
		d := mustDelta(t, r, []uint32{8}).Name
		res := mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/work", P2: d, Target: "mpi://app/a/work"})
		if got := infoNames(res.Affected); !slices.Equal(got, []string{"mpi://app/a"}) {
			t.Fatalf("affected = %q", got)
		}
		wantMembers(t, r, "mpi://app/a", ranges(0, 9))
	})

	t.Run("sub", func(t *testing.T) {
		r := setup(t)
		d := mustDelta(t, r, []uint32{6, 7}).Name
		if got, _ := r.RefCounted(d); !slices.Equal(got, []string{"mpi://app/a/work"}) {
			t.Errorf("X_c = %q", got)
		}
		res := mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/work", P2: d, Target: "mpi://app/a/work"})
		// Inactive sets meeting the delta: root, tail (emptied, kept as a
		// version of size 0); halfplus neither meets it nor contains work.
		if got := infoNames(res.Affected); !slices.Equal(got, []string{"mpi://app/a", "mpi://app/a/tail"}) {
			t.Fatalf("affected = %q", got)
		}
		wantMembers(t, r, "mpi://app/a", ranges(0, 6))
		wantMembers(t, r, "mpi://app/a/tail", nil)
		wantMembers(t, r, "mpi://app/a/tail@0", []uint32{6, 7})
		// The emptied set drops out of the classifications.
		if got, _ := r.RecursivelyAffected("mpi://app/a/half", d); slices.Contains(got, "mpi://app/a/tail") {
			t.Errorf("X_a lists an empty set: %q", got)
		}
	})

	t.Run("new target", func(t *testing.T) {
		r := setup(t)
		d := mustDelta(t, r, []uint32{7}).Name
		// An inactive operand meeting the delta is itself maintained.
		res := mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/tail", P2: d, Target: "mpi://app/a/t2"})
		if got := infoNames(res.Affected); !slices.Equal(got, []string{"mpi://app/a", "mpi://app/a/tail"}) {
			t.Fatalf("affected = %q", got)
		}
		if res.Result.Active || !res.Created {
			t.Errorf("t2 = %+v", res.Result) // inherits inactive from tail
		}
	})

	t.Run("inactive target not updated twice", func(t *testing.T) {
		r := setup(t)
		d := mustDelta(t, r, []uint32{0}).Name
		res := mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/work", P2: d, Target: "mpi://app/a/halfplus"})
		if res.Result.Version != 1 || slices.Contains(infoNames(res.Affected), "mpi://app/a/halfplus") {
			t.Errorf("%+v", res)
		}
		wantMembers(t, r, "mpi://app/a/halfplus", ranges(1, 8))
	})

	t.Run("intersection does not recurse", func(t *testing.T) {
		r := setup(t)
		d := mustDelta(t, r, []uint32{6, 7}).Name
		res := mustOp(t, r, OpRequest{Op: OpIntersection, P1: "mpi://app/a/work", P2: d, Target: "mpi://app/a/leaving"})
		if len(res.Affected) != 0 {
			t.Errorf("affected = %+v", res.Affected)
		}
		wantMembers(t, r, "mpi://app/a", ranges(0, 8))
	})

	t.Run("no delta no recursion", func(t *testing.T) {
		r := setup(t)
		res := mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/work", P2: "mpi://app/a/tail", Target: "mpi://app/a/work"})
		if len(res.Affected) != 0 {
			t.Errorf("affected = %+v", res.Affected)
		}
	})
}

func TestApplyDeltaToInactive(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 8))
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a", Active: ptr(false)})
	put(t, r, "mpi://app/a/lo", ranges(0, 4), false)
	put(t, r, "mpi://app/a/hi", ranges(4, 8), false)
	put(t, r, "mpi://app/a/act", ranges(4, 8), true)
	d := mustDelta(t, r, []uint32{3, 4}).Name

	_, err := r.ApplyDeltaToInactive(d, OpIntersection)
	wantErr(t, err, wire.ErrInvalid, "use union or difference")
	_, err = r.ApplyDeltaToInactive("mpi://app/a/lo", OpDifference)
	wantErr(t, err, wire.ErrInvalid, "not a delta set")
	_, err = r.ApplyDeltaToInactive("mpi://rte/a/rc/7", OpDifference)
	wantErr(t, err, wire.ErrNotFound)

	got, err := r.ApplyDeltaToInactive(d, OpDifference)
	if err != nil {
		t.Fatal(err)
	}
	if n := infoNames(got); !slices.Equal(n, []string{"mpi://app/a", "mpi://app/a/hi", "mpi://app/a/lo"}) {
		t.Fatalf("changed = %q", n)
	}
	wantMembers(t, r, "mpi://app/a", []uint32{0, 1, 2, 5, 6, 7})
	wantMembers(t, r, "mpi://app/a/lo", ranges(0, 3))
	wantMembers(t, r, "mpi://app/a/act", ranges(4, 8)) // active: the application's job
	for _, in := range got {
		if in.Epoch != 1 || in.Version != 1 {
			t.Errorf("%+v", in)
		}
	}
	// Idempotent.
	if again, err := r.ApplyDeltaToInactive(d, OpDifference); err != nil || len(again) != 0 {
		t.Errorf("second run: %+v, %v", again, err)
	}
}

func infoNames(in []Info) []string {
	var out []string
	for _, i := range in {
		out = append(out, i.Name)
	}
	return out
}

// TestSplit covers the three modes of SPLIT and every way to get it wrong.
// The registry: app "a" with ranks 0-2,4-5,7-8,10-11,13 (holes), a
// scheduling hint on the root, and "work" (the root minus 13) at epoch 1.
func TestSplit(t *testing.T) {
	r := mustNew(t, "a", []uint32{0, 1, 2, 4, 5, 7, 8, 10, 11, 13}) // 10 ranks, holes
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a", Sched: map[string]string{"mpi_ps_sched_opt": "8"}})
	d := mustDelta(t, r, []uint32{13}).Name
	mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a", P2: d, Target: "mpi://app/a/work"}) // epoch 1, 9 ranks
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a/work", Active: ptr(false)})
	// ranks of "a" on nodes 3 (0-2), 5 (4,5,13) and 1 (7-11); node 9 holds ranks outside the set.
	nodeOf := map[int]wire.RankRanges{3: wire.Span(0, 2), 5: wire.RangesOf([]uint32{4, 5, 13}), 1: wire.RangesOf([]uint32{7, 8, 10, 11}), 9: wire.Span(20, 20)}

	type part struct {
		name    string
		members []uint32
		version int
		created bool
	}
	cases := []struct {
		name   string
		req    SplitRequest
		parts  []part
		epoch  int
		active bool
		nodes  []int
	}{
		{"count 3 of 10: larger parts first", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 3, Target: "mpi://app/a/c"},
			[]part{{"mpi://app/a/c/0", []uint32{0, 1, 2, 4}, 0, true}, {"mpi://app/a/c/1", []uint32{5, 7, 8}, 0, true}, {"mpi://app/a/c/2", []uint32{10, 11, 13}, 0, true}},
			0, true, nil},
		{"count 1 is a copy", SplitRequest{Set: "mpi://app/a/work", Mode: SplitByCount, Parts: 1, Names: []string{"mpi://app/a/copy"}},
			[]part{{"mpi://app/a/copy", []uint32{0, 1, 2, 4, 5, 7, 8, 10, 11}, 0, true}}, 1, false, nil},
		{"count |set|: singletons, epoch and activity of the source", SplitRequest{Set: "mpi://app/a/work@0", Mode: SplitByCount, Parts: 9, Target: "mpi://app/a/one"},
			[]part{{"mpi://app/a/one/0", []uint32{0}, 0, true}, {"mpi://app/a/one/1", []uint32{1}, 0, true}, {"mpi://app/a/one/2", []uint32{2}, 0, true},
				{"mpi://app/a/one/3", []uint32{4}, 0, true}, {"mpi://app/a/one/4", []uint32{5}, 0, true}, {"mpi://app/a/one/5", []uint32{7}, 0, true},
				{"mpi://app/a/one/6", []uint32{8}, 0, true}, {"mpi://app/a/one/7", []uint32{10}, 0, true}, {"mpi://app/a/one/8", []uint32{11}, 0, true}},
			1, false, nil},
		{"ranks: unsorted lists, an existing name gets a new version", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks, Active: ptr(true),
			Ranks: rl([]uint32{13, 0, 4}, []uint32{1, 2, 5, 7, 8, 10, 11}), Names: []string{"mpi://app/a/roots", "mpi://app/a/c/1"}},
			[]part{{"mpi://app/a/roots", []uint32{0, 4, 13}, 0, true}, {"mpi://app/a/c/1", []uint32{1, 2, 5, 7, 8, 10, 11}, 1, false}}, 0, true, nil},
		{"by node, in node order", SplitRequest{Set: "mpi://app/a", Mode: SplitByNode, Nodes: nodeOf, Active: ptr(false)},
			[]part{{"mpi://app/a/split-1/0", []uint32{7, 8, 10, 11}, 0, true}, {"mpi://app/a/split-1/1", []uint32{0, 1, 2}, 0, true}, {"mpi://app/a/split-1/2", []uint32{4, 5, 13}, 0, true}},
			0, false, []int{1, 3, 5}},
		{"by node of WORLD, generated names go on", SplitRequest{Set: "mpi://WORLD", Mode: SplitByNode, Nodes: nodeOf, Active: ptr(true)},
			[]part{{"mpi://app/a/split-2/0", []uint32{7, 8, 10, 11}, 0, true}, {"mpi://app/a/split-2/1", []uint32{0, 1, 2}, 0, true}, {"mpi://app/a/split-2/2", []uint32{4, 5, 13}, 0, true}},
			0, true, []int{1, 3, 5}},
		{"SHARED of the caller", SplitRequest{Set: "mpi://SHARED", Mode: SplitByCount, Parts: 2, Caller: &Caller{Rank: 4, NodePeers: []uint32{4, 5, 13}}, Target: "mpi://app/a/sh"},
			[]part{{"mpi://app/a/sh/0", []uint32{4, 5}, 0, true}, {"mpi://app/a/sh/1", []uint32{13}, 0, true}}, 0, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := r.List()
			res, err := r.Split(c.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Parts) != len(c.parts) || !slices.Equal(res.Nodes, c.nodes) {
				t.Fatalf("got %d parts on nodes %v, want %d on %v: %+v", len(res.Parts), res.Nodes, len(c.parts), c.nodes, res)
			}
			written := map[string]bool{}
			for i, p := range res.Parts {
				w := c.parts[i]
				in := p.Result
				if in.Name != w.name || in.Version != w.version || p.Created != w.created || !p.Changed || in.Epoch != c.epoch || in.Active != c.active || in.Size != len(w.members) {
					t.Errorf("part %d: %+v (created %v), want %s v%d created %v epoch %d active %v", i, in, p.Created, w.name, w.version, w.created, c.epoch, c.active)
				}
				if len(p.Affected) != 0 {
					t.Errorf("part %d affected other sets: %+v", i, p.Affected)
				}
				wantMembers(t, r, in.Name, w.members)
				written[in.Name] = true
			}
			// Nothing but the parts changed (no recursion, Def. 4).
			for _, b := range before {
				if written[b.Name] {
					continue
				}
				if now, err := r.Get(b.Name, Latest); err != nil || !infoEqual(now, b) {
					t.Errorf("%s changed: %+v -> %+v (%v)", b.Name, b, now, err)
				}
			}
		})
	}
	if in, _ := r.Get("mpi://app/a/c/0", Latest); in.Sched["mpi_ps_sched_opt"] != "8" {
		t.Errorf("a new part did not inherit the hints of the split set: %+v", in)
	}

	long := "mpi://app/a/" + strings.Repeat("n", MaxNameLen-13)
	errCases := []struct {
		name     string
		req      SplitRequest
		sentinel *wire.Error
		frag     []string
	}{
		{"no mode", SplitRequest{Set: "mpi://app/a", Parts: 2}, wire.ErrInvalid, []string{"unknown mode split-mode(0)", "parts, ranks or node"}},
		{"unknown mode", SplitRequest{Set: "mpi://app/a", Mode: 7}, wire.ErrInvalid, []string{"unknown mode split-mode(7)"}},
		{"k=0", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount}, wire.ErrInvalid, []string{"(10 members) into 0 parts", "1 to 10"}},
		{"k<0", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: -1}, wire.ErrInvalid, []string{"into -1 parts"}},
		{"k>size", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 11}, wire.ErrInvalid, []string{"(10 members) into 11 parts"}},
		{"two modes", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Ranks: rl([]uint32{1})}, wire.ErrInvalid, []string{"rank lists of split by ranks given too"}},
		{"node map with count", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Nodes: nodeOf}, wire.ErrInvalid, []string{"node map"}},
		{"no lists", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks}, wire.ErrInvalid, []string{"members in no part: 0-2,4-5,7-8,10-11,13"}},
		{"empty part", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks, Ranks: rl([]uint32{0, 1, 2, 4, 5, 7, 8, 10, 11, 13}, []uint32{})}, wire.ErrInvalid, []string{"part(s) 1 empty"}},
		{"not members", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks, Ranks: rl([]uint32{0, 1, 2, 3, 4, 5, 6}, []uint32{7, 8, 10, 11, 13})}, wire.ErrInvalid, []string{"not members: 3,6"}},
		{"overlap", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks, Ranks: rl([]uint32{0, 1, 2, 4, 5}, []uint32{5, 7, 8}, []uint32{10, 11, 13, 8})}, wire.ErrInvalid, []string{"in more than one part: 5,8"}},
		{"missing", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks, Ranks: rl([]uint32{0, 1}, []uint32{7, 8})}, wire.ErrInvalid, []string{"members in no part: 2,4-5,10-11,13"}},
		{"all at once", SplitRequest{Set: "mpi://app/a", Mode: SplitByRanks, Ranks: rl([]uint32{0, 1, 3}, []uint32{}, []uint32{1})}, wire.ErrInvalid,
			[]string{"part(s) 1 empty", "not members: 3", "in more than one part: 1", "members in no part: 2,4-5"}},
		{"by node, a rank on no node", SplitRequest{Set: "mpi://app/a", Mode: SplitByNode, Nodes: map[int]wire.RankRanges{1: wire.Span(0, 1)}}, wire.ErrState, []string{"rank(s) 2,4-5,7-8,10-11,13 run on no node"}},
		{"by node without a map", SplitRequest{Set: "mpi://app/a", Mode: SplitByNode}, wire.ErrState, []string{"run on no node"}},
		{"by node, a rank on two nodes", SplitRequest{Set: "mpi://app/a", Mode: SplitByNode, Nodes: map[int]wire.RankRanges{1: wire.Span(0, 13), 2: wire.Span(13, 13)}}, wire.ErrInternal, []string{"rank(s) 13 placed on two nodes"}},
		{"delta set", SplitRequest{Set: d, Mode: SplitByCount, Parts: 1}, wire.ErrInvalid, []string{"cannot split mpi://rte/a/rc/1", "delta set"}},
		{"unknown set", SplitRequest{Set: "mpi://app/a/none", Mode: SplitByCount, Parts: 2}, wire.ErrNotFound, []string{"mpi://app/a/none"}},
		{"pruned or missing version", SplitRequest{Set: "mpi://app/a@5", Mode: SplitByCount, Parts: 2}, wire.ErrNotFound, []string{"no version 5"}},
		{"SELF without a caller", SplitRequest{Set: "mpi://SELF", Mode: SplitByCount, Parts: 1}, wire.ErrInvalid, []string{"depends on the calling process"}},
		{"names count", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Names: []string{"mpi://app/a/n"}}, wire.ErrInvalid, []string{"1 name(s) given for 2 part(s)"}},
		{"names count by node", SplitRequest{Set: "mpi://app/a", Mode: SplitByNode, Nodes: nodeOf, Names: []string{"mpi://app/a/n"}}, wire.ErrInvalid, []string{"1 name(s) given for 3 part(s)"}},
		{"name twice", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Names: []string{"mpi://app/a/n", "mpi://app/a/n"}}, wire.ErrInvalid, []string{"given twice"}},
		{"read-only name", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Names: []string{"mpi://app/a/n", "mpi://WORLD"}}, wire.ErrPermission, []string{"read-only"}},
		{"other app's name", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 1, Target: "mpi://app/b/x"}, wire.ErrPermission, []string{`application "b"`}},
		{"bad hint", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Sched: map[string]string{"x": "1"}}, wire.ErrInvalid, []string{`"x"`}},
		{"name too long", SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 2, Target: long}, wire.ErrInvalid, []string{"longer than 255"}},
	}
	before := r.List()
	for _, c := range errCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Split(c.req)
			wantErr(t, err, c.sentinel, c.frag...)
		})
	}
	if after := r.List(); !slices.EqualFunc(before, after, infoEqual) {
		t.Errorf("failed splits changed the registry")
	}
	// A refused split used no generated number.
	res, err := r.Split(SplitRequest{Set: "mpi://app/a", Mode: SplitByCount, Parts: 1})
	if err != nil || res.Parts[0].Result.Name != "mpi://app/a/split-3/0" {
		t.Errorf("after the failures: %+v, %v", res, err)
	}
}

// rl turns rank lists (any order, duplicates allowed) into the ranges a
// split by ranks takes.
func rl(lists ...[]uint32) []wire.RankRanges {
	out := make([]wire.RankRanges, len(lists))
	for i, l := range lists {
		out[i] = wire.RangesOf(l)
	}
	return out
}

func TestParseSplitMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want SplitMode
		err  string
	}{
		{"parts", SplitByCount, ""}, {"RANKS", SplitByRanks, ""}, {"node", SplitByNode, ""},
		{"", 0, "no mode given"}, {"nodes", 0, `unknown mode "nodes"`},
	} {
		got, err := ParseSplitMode(c.in)
		if c.err != "" {
			wantErr(t, err, wire.ErrInvalid, c.err)
			continue
		}
		if err != nil || got != c.want || !strings.EqualFold(got.String(), c.in) {
			t.Errorf("%q: %v, %v", c.in, got, err)
		}
	}
}
