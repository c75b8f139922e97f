package pset

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// Targets (issue): union/difference of two 1,000,000-member sets ≤ 2 ms/op;
// Definitions 2-4 over 10,000 sets of one application ≤ 10 ms.

// bigPair returns two 1M-member sets over 2M ranks: "random" picks members
// independently (dense bitmap containers), "runs" uses long contiguous
// stretches as ranks of grown and shrunk jobs do.
func bigPair(kind string) (world, a, b []uint32) {
	const n = 1_000_000
	rng := rand.New(rand.NewPCG(1, 2))
	for x := range uint32(2 * n) {
		world = append(world, x)
	}
	switch kind {
	case "random":
		for _, x := range world {
			if rng.IntN(2) == 0 {
				a = append(a, x)
			}
			if rng.IntN(2) == 0 {
				b = append(b, x)
			}
		}
	default:
		// Alternate 1000-rank blocks in and out; b is shifted by 500.
		for _, x := range world {
			if x/1000%2 == 0 {
				a = append(a, x)
			}
			if (x+500)/1000%2 == 0 {
				b = append(b, x)
			}
		}
	}
	return
}

func benchOp(b *testing.B, op Op) {
	for _, kind := range []string{"random", "runs"} {
		b.Run(kind, func(b *testing.B) {
			world, x, y := bigPair(kind)
			r := mustNew(b, "bench", world)
			put(b, r, "mpi://app/bench/x", x, true)
			put(b, r, "mpi://app/bench/y", y, true)
			req := OpRequest{Op: op, P1: "mpi://app/bench/x", P2: "mpi://app/bench/y"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := r.ApplyOp(req)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Delete(res.Result.Name); err != nil { // keep memory flat
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnion1M(b *testing.B)      { benchOp(b, OpUnion) }
func BenchmarkDifference1M(b *testing.B) { benchOp(b, OpDifference) }

// classify10k builds one application with 10,000 sets in the shapes a
// malleable application produces: a binary split tree 12 levels deep over
// 65,536 ranks (inner nodes inactive, 4096 leaves active), 1024 active
// per-node sets that each contain four leaves, 400 active strided sets
// (one rank per 512-rank block), 250 active random sets of ~1000 ranks,
// and 135 active twins of per-node sets. With the inactive root that makes
// 10,000 sets in mpi://app/bench.
func classify10k(tb testing.TB) (r *Registry, leaf, delta string) {
	const n = 1 << 16
	r = mustNew(tb, "bench", ranges(0, n))
	mustOp(tb, r, OpRequest{Op: OpNull, Target: "mpi://app/bench", Active: ptr(false)})
	var tree func(path string, lo, hi uint32, depth int)
	tree = func(path string, lo, hi uint32, depth int) {
		if depth > 0 {
			put(tb, r, "mpi://app/bench/t"+path, ranges(lo, hi), depth == 12)
			if leaf == "" && depth == 12 {
				leaf = "mpi://app/bench/t" + path
			}
		}
		if depth == 12 {
			return
		}
		mid := (lo + hi) / 2
		tree(path+"/0", lo, mid, depth+1)
		tree(path+"/1", mid, hi, depth+1)
	}
	tree("", 0, n, 0)
	for i := range uint32(1024) {
		put(tb, r, "mpi://app/bench/node/"+strconv.Itoa(int(i)), ranges(i*64, i*64+64), true)
	}
	for i := range uint32(400) {
		var m []uint32
		for x := i; x < n; x += 512 {
			m = append(m, x)
		}
		put(tb, r, "mpi://app/bench/stride/"+strconv.Itoa(int(i)), m, true)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 250 {
		var m []uint32
		for x := range uint32(n) {
			if rng.IntN(64) == 0 {
				m = append(m, x)
			}
		}
		put(tb, r, "mpi://app/bench/rand/"+strconv.Itoa(i), m, true)
	}
	for i := range 135 {
		k := uint32(rng.IntN(1024))
		put(tb, r, "mpi://app/bench/twin/"+strconv.Itoa(i), ranges(k*64, k*64+64), true)
	}
	delta = mustDelta(tb, r, ranges(1000, 1064)).Name
	return r, leaf, delta
}

func BenchmarkClassify10k(b *testing.B) {
	r, leaf, delta := classify10k(b)
	if got := len(r.appSets()); got != 10_000 {
		b.Fatalf("%d sets, want 10000", got)
	}
	var xm, xc, xa int
	hint := map[string]string{"mpi_ps_sched_iter": "0"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// A change between two evaluations, as between two steps of a
		// resource change: it drops the cached X_m, so every iteration
		// evaluates all three definitions from scratch.
		hint["mpi_ps_sched_iter"] = strconv.Itoa(i)
		if _, err := r.ApplyOp(OpRequest{Op: OpNull, Target: "mpi://app/bench/node/0", Sched: hint}); err != nil {
			b.Fatal(err)
		}
		xm = len(r.Malleable())
		c, err := r.RefCounted(delta)
		if err != nil {
			b.Fatal(err)
		}
		a, err := r.RecursivelyAffected(leaf, delta)
		if err != nil {
			b.Fatal(err)
		}
		xc, xa = len(c), len(a)
	}
	b.ReportMetric(float64(xm), "X_m")
	b.ReportMetric(float64(xc), "X_c")
	b.ReportMetric(float64(xa), "X_a")
}

// BenchmarkMalleable10k is Definition 2 alone, without the cache.
func BenchmarkMalleable10k(b *testing.B) {
	r, _, _ := classify10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r.changed()
		r.Malleable()
	}
}

// TestClassify10kShape checks the benchmark's hierarchy against the
// definitions (including the naive X_m), so the benchmark measures the
// intended work.
func TestClassify10kShape(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 sets")
	}
	r, leaf, delta := classify10k(t)
	xm := r.Malleable()
	// No leaf is malleable (each lies in a per-node set); all node sets,
	// twins, strided and random sets are.
	for _, n := range xm {
		if strings.Contains(n, "/t/") {
			t.Fatalf("leaf %s is malleable", n)
		}
	}
	if len(xm) != 1024+135+400+250 {
		t.Errorf("|X_m| = %d", len(xm))
	}
	xa, err := r.RecursivelyAffected(leaf, delta)
	if err != nil {
		t.Fatal(err)
	}
	// Inner tree nodes above the leaf (11 + root) and those meeting
	// ranks 1000-1063 (a 64-rank block spans at most the 6 deepest inner
	// levels twice): at least 12.
	if len(xa) < 12 {
		t.Errorf("|X_a| = %d: %q", len(xa), xa)
	}
}

// BenchmarkSplit1M splits the 1M-member "runs" set of benchOp by count
// and by rank lists into 16 parts, and by node into 4096 parts (nodes of
// ~244 members, given as the master's placement gives them). The parts
// are deleted after each split to keep memory flat.
func BenchmarkSplit1M(b *testing.B) {
	world, x, _ := bigPair("runs")
	nodeOf := map[int]wire.RankRanges{}
	for i, r := range x {
		n := i * 4096 / len(x)
		nodeOf[n] = nodeOf[n].Add(r)
	}
	var lists []wire.RankRanges
	for i := range 16 {
		lists = append(lists, wire.RangesOf(x[i*len(x)/16:(i+1)*len(x)/16]))
	}
	for _, c := range []struct {
		name string
		req  SplitRequest
		k    int
	}{
		{"parts", SplitRequest{Mode: SplitByCount, Parts: 16}, 16},
		{"ranks", SplitRequest{Mode: SplitByRanks, Ranks: lists}, 16},
		{"node", SplitRequest{Mode: SplitByNode, Nodes: nodeOf}, 4096},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := mustNew(b, "bench", world)
			put(b, r, "mpi://app/bench/x", x, true)
			req := c.req
			req.Set = "mpi://app/bench/x"
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := r.Split(req)
				if err != nil || len(res.Parts) != c.k {
					b.Fatalf("%d parts, %v", len(res.Parts), err)
				}
				for _, p := range res.Parts {
					if err := r.Delete(p.Result.Name); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
