package wire

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func placementMap(pls []Placement) map[string]RankRanges {
	m := map[string]RankRanges{}
	for _, pl := range pls {
		m[pl.Node] = pl.Ranks
	}
	return m
}

// randomData places ranks 0..n-1 of a job on some of nodes n0..n(k-1),
// in node order, as the master does.
func randomData(r *rand.Rand, gen uint64, k, n int) JobData {
	d := JobData{Gen: gen, Job: "j", Size: uint32(n), NextRank: uint32(n)}
	per := make([]RankRanges, k)
	for rank := range n {
		i := r.IntN(k)
		per[i] = per[i].Add(uint32(rank))
	}
	for i, rr := range per {
		if len(rr) > 0 {
			d.Placement = append(d.Placement, Placement{Node: fmt.Sprintf("n%d", i), Ranks: rr})
		}
	}
	return d
}

// TestJobDataDeltaRoundTrip: applying the delta of any two placements to
// the first gives the second, with the nodes of the first in their order.
func TestJobDataDeltaRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		k := 1 + r.IntN(12)
		old := randomData(r, uint64(i), k, r.IntN(40))
		next := randomData(r, uint64(i)+1, k, r.IntN(40))
		if i%2 == 1 { // a change in flight: what it adds and removes rides whole
			next.Pending, next.Adding, next.Leaving = "mpi://rte/a/rc/1", Span(40, 41), RangesOf([]uint32{3, 7})
		}
		delta := next.DeltaFrom(&old)
		if !delta.Delta || delta.Base != old.Gen || delta.Gen != next.Gen {
			t.Fatalf("delta header: %+v", delta)
		}
		got := old.Apply(&delta)
		if got.Delta || got.Base != 0 || got.Gen != next.Gen || got.Size != next.Size {
			t.Fatalf("applied header: %+v", got)
		}
		if got.Pending != next.Pending || !slices.Equal(got.Adding, next.Adding) || !slices.Equal(got.Leaving, next.Leaving) {
			t.Fatalf("case %d: the change in flight %q %v %v, want %q %v %v", i, got.Pending, got.Adding, got.Leaving, next.Pending, next.Adding, next.Leaving)
		}
		gm, nm := placementMap(got.Placement), placementMap(next.Placement)
		if len(gm) != len(got.Placement) || len(gm) != len(nm) {
			t.Fatalf("case %d: placement %v, want %v", i, got.Placement, next.Placement)
		}
		for node, rr := range nm {
			if !slices.Equal(gm[node], rr) {
				t.Fatalf("case %d: node %s has %v, want %v", i, node, gm[node], rr)
			}
		}
		// Nodes that were in old keep old's relative order.
		var kept []string
		for _, pl := range old.Placement {
			if _, ok := nm[pl.Node]; ok {
				kept = append(kept, pl.Node)
			}
		}
		var gotKept []string
		for _, pl := range got.Placement {
			if _, ok := placementMap(old.Placement)[pl.Node]; ok {
				gotKept = append(gotKept, pl.Node)
			}
		}
		if !slices.Equal(kept, gotKept) {
			t.Fatalf("case %d: order of the old nodes %v, want %v", i, gotKept, kept)
		}
	}
}

// TestJobDataDeltaSize: a change that touches one node of a thousand
// carries one entry.
func TestJobDataDeltaSize(t *testing.T) {
	old := JobData{Gen: 7}
	for i := range 1000 {
		old.Placement = append(old.Placement, Placement{Node: fmt.Sprintf("n%d", i), Ranks: RankRanges{{Lo: uint32(i), Hi: uint32(i)}}})
	}
	for _, tc := range []struct {
		name string
		edit func(pl []Placement) []Placement
		want []Placement
	}{
		{"add a rank on a node", func(pl []Placement) []Placement {
			pl[500].Ranks = pl[500].Ranks.Add(1000)
			return pl
		}, []Placement{{Node: "n500", Ranks: RankRanges{{Lo: 500, Hi: 500}, {Lo: 1000, Hi: 1000}}}}},
		{"a new node", func(pl []Placement) []Placement {
			return append(pl, Placement{Node: "x", Ranks: RankRanges{{Lo: 1000, Hi: 1000}}})
		}, []Placement{{Node: "x", Ranks: RankRanges{{Lo: 1000, Hi: 1000}}}}},
		{"a node left", func(pl []Placement) []Placement {
			return slices.Delete(pl, 3, 4)
		}, []Placement{{Node: "n3"}}},
		{"nothing changed", func(pl []Placement) []Placement { return pl }, nil},
	} {
		next := JobData{Gen: 8, Placement: tc.edit(slices.Clone(old.Placement))}
		if d := next.DeltaFrom(&old); !slices.EqualFunc(d.Placement, tc.want, func(a, b Placement) bool {
			return a.Node == b.Node && slices.Equal(a.Ranks, b.Ranks)
		}) {
			t.Errorf("%s: delta %v, want %v", tc.name, d.Placement, tc.want)
		}
	}
}
