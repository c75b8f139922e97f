package pset

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/dynrt/dynrt/wire"
)

// Property tests of the set algebra on random sets with holes, with a fixed
// seed and a bounded number of iterations so that failures reproduce.

func newRand() *rand.Rand { return rand.New(rand.NewPCG(0x5eed, 0xd15c)) }

// randUniverse returns WORLD for a random job: ranks below 3*n with holes,
// as left by ranks that were never reused.
func randUniverse(rng *rand.Rand, n int) []uint32 {
	var u []uint32
	for x := range uint32(3 * n) {
		if rng.IntN(3) != 0 {
			u = append(u, x)
		}
	}
	return u
}

// randSubset picks members of u with a random density; sometimes a
// contiguous slice, so that run containers take part too.
func randSubset(rng *rand.Rand, u []uint32) []uint32 {
	if rng.IntN(4) == 0 {
		lo := rng.IntN(len(u))
		return slices.Clone(u[lo : lo+1+rng.IntN(len(u)-lo)])
	}
	p := 1 + rng.IntN(9)
	var s []uint32
	for _, x := range u {
		if rng.IntN(10) < p {
			s = append(s, x)
		}
	}
	return s
}

// model is the reference: plain sorted slices and obvious loops.
func model(op Op, a, b []uint32) []uint32 {
	in := func(s []uint32, x uint32) bool { _, ok := slices.BinarySearch(s, x); return ok }
	var out []uint32
	switch op {
	case OpUnion:
		out = slices.Concat(a, b)
		slices.Sort(out)
		out = slices.Compact(out)
	case OpDifference:
		for _, x := range a {
			if !in(b, x) {
				out = append(out, x)
			}
		}
	case OpIntersection:
		for _, x := range a {
			if in(b, x) {
				out = append(out, x)
			}
		}
	}
	return out
}

// algebra wraps a registry with a tiny "evaluate op and return the name"
// helper that also checks every result against the model.
type algebra struct {
	t *testing.T
	r *Registry
}

func (a algebra) op(op Op, p1, p2 string) string {
	a.t.Helper()
	want := model(op, members(a.t, a.r, p1), members(a.t, a.r, p2))
	res, err := a.r.ApplyOp(OpRequest{Op: op, P1: p1, P2: p2})
	if len(want) == 0 {
		if !errors.Is(err, wire.ErrInvalid) {
			a.t.Fatalf("%s(%s, %s) is empty, want invalid error, got %v", op, p1, p2, err)
		}
		return ""
	}
	if err != nil {
		a.t.Fatalf("%s(%s, %s): %v", op, p1, p2, err)
	}
	wantMembers(a.t, a.r, res.Result.Name, want)
	if res.Result.Size != len(want) {
		a.t.Fatalf("%s: mpi_size %d, want %d", res.Result.Name, res.Result.Size, len(want))
	}
	return res.Result.Name
}

func (a algebra) same(x, y string, law string) {
	a.t.Helper()
	if x == "" || y == "" {
		if x != y {
			a.t.Fatalf("%s: one side empty, the other not (%q, %q)", law, x, y)
		}
		return
	}
	if gx, gy := members(a.t, a.r, x), members(a.t, a.r, y); !slices.Equal(gx, gy) {
		a.t.Fatalf("%s: %v != %v", law, gx, gy)
	}
}

func TestAlgebraLaws(t *testing.T) {
	rng := newRand()
	for iter := range 60 {
		t.Run(strconv.Itoa(iter), func(t *testing.T) {
			u := randUniverse(rng, 20+rng.IntN(400))
			r := mustNew(t, "p", u)
			a := algebra{t, r}
			A, B, C := "mpi://app/p/A", "mpi://app/p/B", "mpi://app/p/C"
			for _, n := range []string{A, B, C} {
				s := randSubset(rng, u)
				if len(s) == 0 {
					s = u[:1]
				}
				put(t, r, n, s, true)
			}
			W := "mpi://WORLD"
			// Commutativity.
			a.same(a.op(OpUnion, A, B), a.op(OpUnion, B, A), "A∪B = B∪A")
			a.same(a.op(OpIntersection, A, B), a.op(OpIntersection, B, A), "A∩B = B∩A")
			// Associativity (an empty intermediate makes both sides empty
			// for ∩; for ∪ it cannot happen).
			a.same(a.op(OpUnion, a.op(OpUnion, A, B), C), a.op(OpUnion, A, a.op(OpUnion, B, C)), "(A∪B)∪C = A∪(B∪C)")
			if ab, bc := a.op(OpIntersection, A, B), a.op(OpIntersection, B, C); ab != "" && bc != "" {
				a.same(a.op(OpIntersection, ab, C), a.op(OpIntersection, A, bc), "(A∩B)∩C = A∩(B∩C)")
			}
			// Idempotence.
			a.same(a.op(OpUnion, A, A), A, "A∪A = A")
			a.same(a.op(OpIntersection, A, A), A, "A∩A = A")
			// De Morgan against the universe WORLD.
			if nA, nB := a.op(OpDifference, W, A), a.op(OpDifference, W, B); nA != "" && nB != "" {
				a.same(a.op(OpDifference, W, a.op(OpUnion, A, B)), a.op(OpIntersection, nA, nB), "W∖(A∪B) = (W∖A)∩(W∖B)")
				if ab := a.op(OpIntersection, A, B); ab != "" {
					a.same(a.op(OpDifference, W, ab), a.op(OpUnion, nA, nB), "W∖(A∩B) = (W∖A)∪(W∖B)")
				}
			}
			// (A∖B) ∩ B = ∅: always the "empty result" error.
			if d := a.op(OpDifference, A, B); d != "" {
				_, err := r.ApplyOp(OpRequest{Op: OpIntersection, P1: d, P2: B})
				wantErr(t, err, wire.ErrInvalid, "INTERSECTION(", "has no members")
			}
			// A∖A = ∅ too.
			_, err := r.ApplyOp(OpRequest{Op: OpDifference, P1: A, P2: A})
			wantErr(t, err, wire.ErrInvalid, "DIFFERENCE(")
		})
	}
}

// TestVersionHistory runs many random operations into a small pool of
// names (so most create new versions, some recreate deleted names) and
// then checks that every (name, version) ever reported still has exactly
// the membership it had when it was reported.
func TestVersionHistory(t *testing.T) {
	rng := newRand()
	u := randUniverse(rng, 300)
	r := mustNew(t, "h", u)
	pool := []string{"mpi://app/h", "mpi://WORLD"}
	for i := range 6 {
		pool = append(pool, "mpi://app/h/s"+strconv.Itoa(i))
	}
	type key struct {
		name string
		v    int
	}
	seen := map[key][]uint32{}
	record := func(in Info) {
		m := members(t, r, fmt.Sprintf("%s@%d", in.Name, in.Version))
		if old, ok := seen[key{in.Name, in.Version}]; ok && !slices.Equal(old, m) {
			t.Fatalf("%s@%d changed from %v to %v", in.Name, in.Version, old, m)
		}
		seen[key{in.Name, in.Version}] = m
	}
	for _, in := range r.List() {
		record(in)
	}
	deltas := 0
	nsplits := 0
	split := func(t *testing.T, rng *rand.Rand, r *Registry, ref string, names []string) {
		res, _, err := randSplit(rng, r, ref, names)
		if err != nil {
			if !errors.Is(err, wire.ErrInvalid) && !errors.Is(err, wire.ErrNotFound) {
				t.Fatalf("split %s: %v", ref, err)
			}
			return
		}
		for _, p := range res.Parts {
			record(p.Result)
		}
		nsplits++
	}
	for step := range 1000 {
		switch k := rng.IntN(20); {
		case k == 0: // a delta, used as p2 below
			if _, err := r.DefineDelta(randSubset(rng, u)[:1]); err == nil {
				deltas++
			}
		case k == 1: // delete and later recreate
			n := pool[2+rng.IntN(len(pool)-2)]
			if err := r.Delete(n); err != nil && !errors.Is(err, wire.ErrNotFound) && !errors.Is(err, wire.ErrPermission) {
				t.Fatal(err)
			}
		default:
			p1 := pool[rng.IntN(len(pool))]
			p2 := pool[rng.IntN(len(pool))]
			if deltas > 0 && rng.IntN(3) == 0 {
				p2 = DeltaName("h", uint64(1+rng.IntN(deltas)))
			}
			if in, err := r.Get(p1, Latest); err == nil && in.Newest > in.Oldest && rng.IntN(2) == 0 {
				p1 = fmt.Sprintf("%s@%d", p1, in.Oldest+rng.IntN(in.Newest-in.Oldest+1))
			}
			target := pool[1+rng.IntN(len(pool)-1)]
			if target == "mpi://WORLD" {
				target = pool[0]
			}
			if rng.IntN(8) == 0 { // a split into pool names (or fresh ones)
				split(t, rng, r, p1, pool[2:])
				continue
			}
			res, err := r.ApplyOp(OpRequest{Op: Op(1 + rng.IntN(3)), P1: p1, P2: p2, Target: target})
			if err != nil {
				if !errors.Is(err, wire.ErrInvalid) && !errors.Is(err, wire.ErrNotFound) {
					t.Fatalf("step %d: %v", step, err)
				}
				continue
			}
			record(res.Result)
			for _, in := range res.Affected {
				record(in)
			}
		}
	}
	if len(seen) < 200 || nsplits < 50 {
		t.Fatalf("only %d versions seen, %d splits; the test exercises too little", len(seen), nsplits)
	}
	checked := 0
	for k, want := range seen {
		got, err := r.Members(fmt.Sprintf("%s@%d", k.name, k.v))
		if errors.Is(err, wire.ErrNotFound) {
			continue // deleted since; the name's later versions are checked
		}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s@%d = %v, %v; want %v", k.name, k.v, got, err, want)
		}
		checked++
	}
	t.Logf("versions seen %d, checked %d", len(seen), checked)
	if checked < 100 {
		t.Fatalf("only %d versions checked", checked)
	}
}

// TestFastPaths checks subsetOf and intersects, which take shortcuts, against
// plain roaring on random pairs (contiguous, sparse, empty, disjoint).
func TestFastPaths(t *testing.T) {
	rng := newRand()
	gen := func() *version {
		var m []uint32
		lo := uint32(rng.IntN(200))
		switch rng.IntN(4) {
		case 0:
			m = ranges(lo, lo+uint32(rng.IntN(60)))
		case 1:
			for x := lo; x < lo+100; x++ {
				if rng.IntN(3) == 0 {
					m = append(m, x)
				}
			}
		case 2:
			m = append(ranges(lo, lo+10), lo+20+uint32(rng.IntN(5)))
		default:
			m = []uint32{lo}
		}
		return newVersion(roaring.BitmapOf(m...), 0)
	}
	for range 5000 {
		a, b := gen(), gen()
		if got, want := intersects(a, b), a.bm.Intersects(b.bm); got != want {
			t.Fatalf("intersects(%v, %v) = %v", a.bm, b.bm, got)
		}
		if got, want := subsetOf(a, b), a.bm.AndCardinality(b.bm) == a.bm.GetCardinality(); got != want {
			t.Fatalf("subsetOf(%v, %v) = %v", a.bm, b.bm, got)
		}
	}
}

// randSplit splits ref in a random mode into parts named from names (or
// generated names), checking the parts against the model: they partition
// ref, in the order and sizes the mode promises.
func randSplit(rng *rand.Rand, r *Registry, ref string, names []string) (SplitResult, SplitMode, error) {
	m, err := r.Members(ref)
	if err != nil {
		return SplitResult{}, 0, err
	}
	req := SplitRequest{Set: ref, Mode: SplitMode(1 + rng.IntN(3))}
	var want [][]uint32
	switch req.Mode {
	case SplitByCount:
		req.Parts = 1 + rng.IntN(min(len(m), 6))
		// model: member i goes to the part whose range holds i
		q, rem := len(m)/req.Parts, len(m)%req.Parts
		for i, lo := 0, 0; i < req.Parts; i++ {
			n := q
			if i < rem {
				n++
			}
			want = append(want, m[lo:lo+n])
			lo += n
		}
	case SplitByRanks:
		k := 1 + rng.IntN(min(len(m), 5))
		want = make([][]uint32, k)
		for i, x := range m { // every part gets one, the rest at random
			p := i
			if i >= k {
				p = rng.IntN(k)
			}
			want[p] = append(want[p], x)
		}
		for _, l := range want {
			shuffled := slices.Clone(l)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			req.Ranks = append(req.Ranks, wire.RangesOf(shuffled))
		}
		for _, l := range want {
			slices.Sort(l)
		}
	case SplitByNode:
		req.Nodes = map[int]wire.RankRanges{}
		byNode := map[int][]uint32{}
		for _, x := range m {
			n := rng.IntN(4) * 10
			req.Nodes[n] = req.Nodes[n].Add(x)
			byNode[n] = append(byNode[n], x)
		}
		for x := range uint32(3) { // ranks outside the set on a node of their own
			req.Nodes[99] = req.Nodes[99].Add(m[len(m)-1] + 1 + x)
		}
		for _, n := range slices.Sorted(maps.Keys(byNode)) {
			want = append(want, byNode[n])
		}
	}
	if len(want) <= len(names) && rng.IntN(2) == 0 {
		req.Names = names[:len(want)]
	}
	res, err := r.Split(req)
	if err != nil {
		if len(req.Names) > 0 { // a pool name may be the read-only root
			return res, req.Mode, err
		}
		return res, req.Mode, fmt.Errorf("%s %+v: %w (not expected)", ref, req, err)
	}
	if len(res.Parts) != len(want) {
		return res, req.Mode, fmt.Errorf("split %s by %s: %d parts, want %d", ref, req.Mode, len(res.Parts), len(want))
	}
	var all []uint32
	for i, p := range res.Parts {
		got, err := r.Members(fmt.Sprintf("%s@%d", p.Result.Name, p.Result.Version))
		if err != nil || !slices.Equal(got, want[i]) || p.Result.Size != len(want[i]) {
			return res, req.Mode, fmt.Errorf("split %s by %s: part %d = %v (%v), want %v", ref, req.Mode, i, got, err, want[i])
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	if !slices.Equal(all, m) {
		return res, req.Mode, fmt.Errorf("split %s: the parts hold %v, the set %v", ref, all, m)
	}
	return res, req.Mode, nil
}

// TestSplitProperties: on random sets, every mode yields a partition of
// the set in the promised order (checked by randSplit against the model),
// by count with sizes that differ by at most one, larger parts first;
// the parts carry the split version's epoch; no other set changes.
func TestSplitProperties(t *testing.T) {
	rng := newRand()
	modes := map[SplitMode]int{}
	defer func() {
		if len(modes) != 3 {
			t.Errorf("modes exercised: %v", modes)
		}
	}()
	for iter := range 200 {
		u := randUniverse(rng, 5+rng.IntN(200))
		r := mustNew(t, "s", u)
		put(t, r, "mpi://app/s/A", u, true)
		var d string
		for range 1 + rng.IntN(3) { // a few changes: epochs go up
			d = mustDelta(t, r, u[:1]).Name
		}
		mustOp(t, r, OpRequest{Op: OpUnion, P1: "mpi://app/s/A", P2: d, Target: "mpi://app/s/A"})
		s := randSubset(rng, u)
		if len(s) == 0 {
			s = u[:1]
		}
		put(t, r, "mpi://app/s/B", s, rng.IntN(2) == 0)
		src := []string{"mpi://app/s/A", "mpi://app/s/B", "mpi://WORLD"}[rng.IntN(3)]
		srcInfo, _ := r.Get(src, Latest)
		before := r.List()
		res, mode, err := randSplit(rng, r, src, nil)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		sizes := []int{}
		for _, p := range res.Parts {
			if p.Result.Epoch != srcInfo.Epoch || p.Result.Active != srcInfo.Active || !p.Created {
				t.Fatalf("iteration %d: part %+v of %+v", iter, p, srcInfo)
			}
			sizes = append(sizes, p.Result.Size)
		}
		if mode == SplitByCount && (slices.Max(sizes)-slices.Min(sizes) > 1 || !slices.IsSortedFunc(sizes, func(a, b int) int { return b - a })) {
			t.Fatalf("iteration %d: part sizes %v", iter, sizes)
		}
		modes[mode]++
		after := r.List()
		if len(after) != len(before)+len(res.Parts) {
			t.Fatalf("iteration %d: %d sets before, %d parts, %d after", iter, len(before), len(res.Parts), len(after))
		}
		for _, b := range before {
			if now, _ := r.Get(b.Name, Latest); !infoEqual(now, b) {
				t.Fatalf("iteration %d: %s changed by a split", iter, b.Name)
			}
		}
	}
}
