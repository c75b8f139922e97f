package pset

import (
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
)

// ranges returns the ranks [lo, hi).
func ranges(lo, hi uint32) []uint32 {
	var out []uint32
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func mustNew(t testing.TB, app string, members []uint32) *Registry {
	t.Helper()
	r, err := New(app, members)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// put stores a set directly, bypassing the operations, so that tests can
// build arbitrary hierarchies (including ranks outside WORLD).
func put(t testing.TB, r *Registry, name string, members []uint32, active bool) {
	t.Helper()
	n, p, err := r.target(name)
	if err != nil {
		t.Fatal(err)
	}
	r.commit(write{name: n, p: p, bm: roaring.BitmapOf(members...), active: active})
}

func mustOp(t testing.TB, r *Registry, req OpRequest) OpResult {
	t.Helper()
	res, err := r.ApplyOp(req)
	if err != nil {
		t.Fatalf("ApplyOp(%+v): %v", req, err)
	}
	return res
}

func mustDelta(t testing.TB, r *Registry, members []uint32) Info {
	t.Helper()
	in, err := r.DefineDelta(members)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func members(t testing.TB, r *Registry, ref string) []uint32 {
	t.Helper()
	m, err := r.Members(ref)
	if err != nil {
		t.Fatalf("Members(%s): %v", ref, err)
	}
	return m
}

func wantMembers(t testing.TB, r *Registry, ref string, want []uint32) {
	t.Helper()
	if got := members(t, r, ref); !slices.Equal(got, want) {
		t.Errorf("members of %s = %v, want %v", ref, got, want)
	}
}

func ptr[T any](v T) *T { return &v }
