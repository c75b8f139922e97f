package wire

import (
	"reflect"
	"testing"
)

func TestRelayParts(t *testing.T) {
	for _, tc := range []struct {
		n, radix int
		want     [][2]int
	}{
		{0, 4, nil},
		{1, 4, [][2]int{{0, 1}}},
		{3, 4, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{4, 2, [][2]int{{0, 2}, {2, 4}}},
		{5, 2, [][2]int{{0, 3}, {3, 5}}},
		{7, 3, [][2]int{{0, 3}, {3, 5}, {5, 7}}},
		{3, 0, [][2]int{{0, 3}}},
		{3, -1, [][2]int{{0, 3}}},
	} {
		if got := RelayParts(tc.n, tc.radix); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("RelayParts(%d, %d) = %v, want %v", tc.n, tc.radix, got, tc.want)
		}
	}
}

// TestRelayTree checks, for every size and radix up to bounds, that the
// tree the parts make reaches every node exactly once and that its depth
// is the ceiling of log_radix of the nodes (each level multiplies the
// nodes reached by about radix).
func TestRelayTree(t *testing.T) {
	// walk returns the deepest level of a node of [lo, hi), which are
	// reached at level (level-1 if there are none).
	var walk func(lo, hi, radix, level int, seen []int) int
	walk = func(lo, hi, radix, level int, seen []int) int {
		deepest := level - 1
		for _, p := range RelayParts(hi-lo, radix) {
			a, b := lo+p[0], lo+p[1]
			seen[a]++ // the part's first node gets the relay
			deepest = max(deepest, level, walk(a+1, b, radix, level+1, seen))
		}
		return deepest
	}
	for radix := 2; radix <= 8; radix++ {
		for n := 1; n <= 300; n++ {
			seen := make([]int, n)
			depth := walk(0, n, radix, 1, seen)
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("radix %d, %d nodes: node %d reached %d times", radix, n, i, c)
				}
			}
			// A tree of depth d where every inner node has up to radix
			// children below the first level holds at most
			// radix + radix^2 + ... + radix^d nodes.
			capacity, level := 0, 1
			for range depth - 1 {
				level *= radix
				capacity += level
			}
			if n <= capacity {
				t.Fatalf("radix %d, %d nodes: depth %d, but %d levels would hold them", radix, n, depth, depth-1)
			}
		}
	}
}
