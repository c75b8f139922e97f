package pset

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// fig61 builds the example of thesis fig. 6.1. app1 (ranks 0-7) has made
// its root set inactive and created the active sets mul, add and roots;
// the runtime announced the SUB delta s1 = {2, 3}, which lies in mul only.
// app2 (ranks 0-3, another job) has only its root set and the SUB delta s2.
func fig61(t testing.TB) (app1 *Registry, s1 string, app2 *Registry, s2 string) {
	app1 = mustNew(t, "app1", ranges(0, 8))
	mustOp(t, app1, OpRequest{Op: OpNull, Target: "mpi://app/app1", Active: ptr(false)})
	for _, s := range []struct {
		name string
		m    []uint32
	}{
		{"mpi://app/app1/mul", []uint32{0, 1, 2, 3}},
		{"mpi://app/app1/add", []uint32{4, 5, 6, 7}},
		{"mpi://app/app1/roots", []uint32{0, 4}},
	} {
		put(t, app1, s.name, s.m, true)
	}
	s1 = mustDelta(t, app1, []uint32{2, 3}).Name
	app2 = mustNew(t, "app2", ranges(0, 4))
	s2 = mustDelta(t, app2, []uint32{3}).Name
	return
}

func TestFig61Classification(t *testing.T) {
	app1, s1, app2, s2 := fig61(t)
	cases := []struct {
		name string
		got  func() ([]string, error)
		want []string
	}{
		{"X_m(app1)", func() ([]string, error) { return app1.Malleable(), nil },
			[]string{"mpi://app/app1/add", "mpi://app/app1/mul", "mpi://app/app1/roots"}},
		{"X_c(s1)", func() ([]string, error) { return app1.RefCounted(s1) },
			[]string{"mpi://app/app1/mul"}},
		{"X_a(op(mul, s1))", func() ([]string, error) { return app1.RecursivelyAffected("mpi://app/app1/mul", s1) },
			[]string{"mpi://app/app1"}},
		{"X_m(app2)", func() ([]string, error) { return app2.Malleable(), nil },
			[]string{"mpi://app/app2"}},
		{"X_c(s2)", func() ([]string, error) { return app2.RefCounted(s2) },
			[]string{"mpi://app/app2"}},
		{"X_a(op(app2, s2))", func() ([]string, error) { return app2.RecursivelyAffected("mpi://app/app2", s2) },
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.got()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestFig61Adapt continues the example: mul drops the subtracted ranks, the
// runtime carries the change over to the inactive root set, and the final
// state of all sets matches a golden file.
func TestFig61Adapt(t *testing.T) {
	app1, s1, _, _ := fig61(t)
	res := mustOp(t, app1, OpRequest{Op: OpDifference, P1: "mpi://app/app1/mul", P2: s1, Target: "mpi://app/app1/mul"})
	if res.Created || !res.Changed || res.Result.Version != 1 || res.Result.Epoch != 1 || res.Result.Size != 2 {
		t.Errorf("result = %+v", res)
	}
	if len(res.Affected) != 1 || res.Affected[0].Name != "mpi://app/app1" || res.Affected[0].Version != 1 || res.Affected[0].Epoch != 1 {
		t.Fatalf("affected = %+v", res.Affected)
	}
	wantMembers(t, app1, "mpi://app/app1", []uint32{0, 1, 4, 5, 6, 7})
	wantMembers(t, app1, "mpi://app/app1@0", ranges(0, 8))
	wantMembers(t, app1, "mpi://WORLD", ranges(0, 8))
	if got, _ := app1.RefCounted(s1); len(got) != 0 {
		t.Errorf("X_c(s1) after adapting = %q, want none", got)
	}
	golden(t, "fig61.json", app1.List())
}

func golden(t *testing.T, file string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", path, got, want)
	}
}

func TestClassifyStrictness(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/twin", ranges(0, 10), true) // equal to the root
	put(t, r, "mpi://app/a/part", ranges(0, 5), true)  // strictly inside both
	put(t, r, "mpi://app/a/idle", ranges(0, 10), false)
	put(t, r, "mpi://app/a/cover", ranges(0, 6), false)
	put(t, r, "mpi://app/a/other", ranges(7, 10), false)
	d := mustDelta(t, r, []uint32{3}).Name

	// Equal active sets are both malleable; strict subsets are not.
	if got, want := r.Malleable(), []string{"mpi://app/a", "mpi://app/a/twin"}; !slices.Equal(got, want) {
		t.Errorf("X_m = %q, want %q", got, want)
	}
	if got, _ := r.RefCounted(d); !slices.Equal(got, []string{"mpi://app/a", "mpi://app/a/twin"}) {
		t.Errorf("X_c = %q", got)
	}
	// Def. 4: inactive sets containing the operand (equal members
	// included) or meeting the delta; "other" does neither.
	if got, want := mustRA(t, r, "mpi://app/a/part", d), []string{"mpi://app/a/cover", "mpi://app/a/idle"}; !slices.Equal(got, want) {
		t.Errorf("X_a(part) = %q, want %q", got, want)
	}
	// An inactive operand is not its own superset; it is listed only when
	// it meets the delta.
	d2 := mustDelta(t, r, []uint32{8}).Name
	if got, want := mustRA(t, r, "mpi://app/a/cover", d2), []string{"mpi://app/a/idle", "mpi://app/a/other"}; !slices.Equal(got, want) {
		t.Errorf("X_a(cover, d2) = %q, want %q", got, want)
	}
	if got, want := mustRA(t, r, "mpi://app/a/other", d2), []string{"mpi://app/a/idle", "mpi://app/a/other"}; !slices.Equal(got, want) {
		t.Errorf("X_a(other, d2) = %q, want %q", got, want)
	}
	// Errors: U must be a delta set, S must exist.
	_, err := r.RefCounted("mpi://app/a")
	wantErr(t, err, wire.ErrInvalid, "not a delta set")
	_, err = r.RecursivelyAffected("mpi://app/a/nope", d)
	wantErr(t, err, wire.ErrNotFound, "mpi://app/a/nope")
	_, err = r.RecursivelyAffected("mpi://app/a", "mpi://WORLD")
	wantErr(t, err, wire.ErrInvalid, "not a delta set")
}

func mustRA(t *testing.T, r *Registry, s, d string) []string {
	t.Helper()
	got, err := r.RecursivelyAffected(s, d)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestMalleableMatchesNaive checks the indexed X_m against the definition
// evaluated pair by pair, on random hierarchies with twins, nesting and
// overlap.
func TestMalleableMatchesNaive(t *testing.T) {
	rng := newRand()
	for iter := range 40 {
		r := mustNew(t, "a", ranges(0, 64))
		n := 5 + rng.IntN(40)
		for i := range n {
			var m []uint32
			switch rng.IntN(4) {
			case 0: // interval
				lo := uint32(rng.IntN(60))
				m = ranges(lo, lo+1+uint32(rng.IntN(int(64-lo))))
			case 1: // twin of an existing set
				all := r.List()
				m = members(t, r, all[rng.IntN(len(all))].Name)
			default: // random subset
				for x := range uint32(64) {
					if rng.IntN(3) == 0 {
						m = append(m, x)
					}
				}
			}
			if len(m) == 0 {
				m = []uint32{uint32(i)}
			}
			put(t, r, "mpi://app/a/s"+strconv.Itoa(i), m, rng.IntN(4) != 0)
		}
		if got, want := r.Malleable(), naiveMalleable(r); !slices.Equal(got, want) {
			t.Fatalf("iteration %d: X_m = %q, naive %q", iter, got, want)
		}
	}
}

func naiveMalleable(r *Registry) []string {
	var out []string
	for _, s := range r.appSets() {
		if !s.active || s.latest().size == 0 {
			continue
		}
		ok := true
		for _, t := range r.appSets() {
			sv, tv := s.latest(), t.latest()
			if t.active && tv.size > sv.size && int(sv.bm.AndCardinality(tv.bm)) == sv.size {
				ok = false
			}
		}
		if ok {
			out = append(out, s.key)
		}
	}
	slices.Sort(out)
	return out
}

func TestMalleableCache(t *testing.T) {
	r := mustNew(t, "a", ranges(0, 10))
	put(t, r, "mpi://app/a/x", ranges(0, 5), true)
	put(t, r, "mpi://app/a/y", ranges(5, 10), true)
	put(t, r, "mpi://app/a/four", []uint32{4}, false)
	want := func(names ...string) {
		t.Helper()
		if got := r.Malleable(); !slices.Equal(got, names) {
			t.Errorf("X_m = %q, want %q", got, names)
		}
	}
	want("mpi://app/a")
	mustOp(t, r, OpRequest{Op: OpNull, Target: "mpi://app/a", Active: ptr(false)})
	want("mpi://app/a/x", "mpi://app/a/y")
	mustOp(t, r, OpRequest{Op: OpDifference, P1: "mpi://app/a/x", P2: "mpi://app/a/four", Target: "mpi://app/a/y"})
	want("mpi://app/a/x") // y = {0..3} lies inside x now
	if err := r.Delete("mpi://app/a/y"); err != nil {
		t.Fatal(err)
	}
	want("mpi://app/a/x")
	mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/a/x", P2: "mpi://WORLD", Target: "mpi://app/a/z"})
	want("mpi://app/a/z")
	got := r.Malleable()
	got[0] = "scribbled"
	want("mpi://app/a/z")
}
