package pmi

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestProcessMapping(t *testing.T) {
	tests := []struct {
		name string
		node []int
		want string
	}{
		{"one rank", []int{0}, "(vector,(0,1,1))"},
		{"one node", []int{7, 7, 7, 7}, "(vector,(0,1,4))"},
		{"block 2x2", []int{0, 0, 1, 1}, "(vector,(0,2,2))"},
		{"block 4 nodes x 4", []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, "(vector,(0,4,4))"},
		{"irregular 3+1", []int{0, 0, 0, 1}, "(vector,(0,1,3),(1,1,1))"},
		{"round robin 2 nodes", []int{0, 1, 0, 1, 0}, "(vector,(0,2,1))"},
		{"round robin 4 nodes, 6 ranks", []int{0, 1, 2, 3, 0, 1}, "(vector,(0,4,1))"},
		{"arbitrary", []int{0, 1, 0, 2}, "(vector,(0,2,1),(0,1,1),(2,1,1))"},
		{"labels renumbered", []int{5, 5, 2, 2}, "(vector,(0,2,2))"},
		{"cyclic pairs", []int{0, 0, 1, 1, 0, 0, 1, 1}, "(vector,(0,2,2))"},
		{"none", nil, ""},
	}
	for _, tt := range tests {
		got := ProcessMapping(tt.node)
		if got != tt.want {
			t.Errorf("%s: ProcessMapping(%v) = %q, want %q", tt.name, tt.node, got, tt.want)
		}
	}
}

// renumber gives node labels ids in order of first appearance.
func renumber(node []int) []int {
	ids := map[int]int{}
	out := make([]int, len(node))
	for i, n := range node {
		id, ok := ids[n]
		if !ok {
			id = len(ids)
			ids[n] = id
		}
		out[i] = id
	}
	return out
}

// TestMappingRoundTrip: MPICH's reading of the mapping gives back the
// placement, for random placements of every shape.
func TestMappingRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		n := 1 + rng.IntN(40)
		nodes := 1 + rng.IntN(6)
		node := make([]int, n)
		switch i % 3 {
		case 0: // arbitrary
			for r := range node {
				node[r] = rng.IntN(nodes)
			}
		case 1: // block
			per := 1 + rng.IntN(5)
			for r := range node {
				node[r] = r / per
			}
		case 2: // cyclic
			for r := range node {
				node[r] = r % nodes
			}
		}
		m := ProcessMapping(node)
		got, err := ParseMapping(m, n)
		if err != nil {
			t.Fatalf("ParseMapping(%q): %v", m, err)
		}
		if want := renumber(node); !slices.Equal(got, want) {
			t.Fatalf("placement %v: mapping %q reads as %v", node, m, got)
		}
	}
}

func TestParseMapping(t *testing.T) {
	good := []struct {
		in   string
		n    int
		want []int
	}{
		{"(vector,(0,1,1))", 3, []int{0, 0, 0}},
		{"(vector, (0,2,1))", 5, []int{0, 1, 0, 1, 0}},
		{"(vector,(0,1,3),(1,1,1))", 4, []int{0, 0, 0, 1}},
		// a wrap restarts at the first block whose start is 0
		{"(vector,(1,1,1),(0,1,1))", 4, []int{1, 0, 0, 0}},
	}
	for _, tt := range good {
		got, err := ParseMapping(tt.in, tt.n)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseMapping(%q, %d) = %v, %v; want %v", tt.in, tt.n, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "(vector)", "(vector,(0,1))", "(vector,(0,1,0))", "(vector,(00,1,1))", "(vector,(0,1,1)) x", "vector,(0,1,1))", "(vector,(1,1,1))"} {
		if got, err := ParseMapping(in, 4); err == nil {
			t.Errorf("ParseMapping(%q) = %v, want an error", in, got)
		}
	}
}
