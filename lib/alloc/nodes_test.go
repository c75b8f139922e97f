package alloc

import (
	"errors"
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestAllocateOnNodes: Options.Nodes confines a placement to the listed
// nodes, for every mapping and for oversubscription, and counts only their
// free slots.
func TestAllocateOnNodes(t *testing.T) {
	nodeOf := func(ps []Proc) []int {
		out := make([]int, len(ps))
		for i, p := range ps {
			out[i] = p.Node
		}
		return out
	}
	tests := []struct {
		name  string
		n     int
		opts  Options
		nodes []int // node of each new process, in rank order
		over  int   // how many of them are oversubscribed
	}{
		{"slot on one node", 2, Options{Nodes: []int{2}}, []int{2, 2}, 0},
		{"slot on two nodes", 4, Options{Nodes: []int{3, 1}}, []int{1, 1, 1, 3}, 0},
		{"node round robin", 4, Options{MapBy: MapByNode, Nodes: []int{1, 3}}, []int{1, 3, 1, 1}, 0},
		{"duplicates count once", 3, Options{Nodes: []int{2, 2}}, []int{2, 2, 2}, 0},
		{"oversubscribe stays", 5, Options{Oversubscribe: true, Nodes: []int{2, 3}}, []int{2, 2, 2, 3, 2}, 1},
		{"empty list: all nodes", 4, Options{}, []int{0, 0, 1, 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, grid(4, 3))
			mustAlloc(t, a, "other", 1, Options{}) // node 0 slot 0 busy
			mustAlloc(t, a, "busy3", 2, Options{Nodes: []int{3}})
			ps := mustAlloc(t, a, "j", tt.n, tt.opts)
			if got := nodeOf(ps); !slices.Equal(got, tt.nodes) {
				t.Errorf("nodes %v, want %v", got, tt.nodes)
			}
			over := 0
			for _, p := range ps {
				if p.Slot == Oversubscribed {
					over++
				}
			}
			if over != tt.over {
				t.Errorf("%d oversubscribed, want %d", over, tt.over)
			}
		})
	}
}

func TestAllocateOnNodesErrors(t *testing.T) {
	a := mustNew(t, grid(2, 2))
	mustAlloc(t, a, "x", 1, Options{Nodes: []int{1}})
	if _, err := a.Allocate("j", 2, Options{Nodes: []int{1}}); !errors.Is(err, wire.ErrNoResources) {
		t.Errorf("2 on a node with 1 free slot: %v, want ErrNoResources", err)
	}
	if _, err := a.Allocate("j", 1, Options{Nodes: []int{2}}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("unknown node index: %v, want ErrInvalid", err)
	}
	if a.Free() != 3 || a.Size("j") != 0 {
		t.Errorf("a failed allocation changed something: free %d, size %d", a.Free(), a.Size("j"))
	}
}
