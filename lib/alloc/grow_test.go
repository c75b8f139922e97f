package alloc

import (
	"errors"
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestAddRemoveNode runs sequences of node additions, removals and
// placements and checks the table after every step (check), the nodes
// each placement chose, and the errors of the refused steps.
func TestAddRemoveNode(t *testing.T) {
	type step struct {
		op    string // add NAME SLOTS | rm IDX | alloc JOB N | over JOB N | on JOB N IDX | rel JOB RANK... | relall JOB
		name  string
		n     int
		idx   []int
		nodes []int // alloc: node of each new process
		err   error // expected error (nil = success)
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"grow then fill the new node", []step{
			{op: "alloc", name: "j", n: 4, nodes: []int{0, 0, 1, 1}},
			{op: "add", name: "n3", n: 3},
			{op: "alloc", name: "j", n: 2, nodes: []int{2, 2}},
			{op: "alloc", name: "k", n: 2, err: wire.ErrNoResources},
		}},
		{"busy node cannot leave", []step{
			{op: "add", name: "n3", n: 2},
			{op: "alloc", name: "j", n: 5, nodes: []int{0, 0, 1, 1, 2}},
			{op: "rm", idx: []int{2}, err: wire.ErrBusy},
			{op: "rel", name: "j", idx: []int{4}},
			{op: "rm", idx: []int{2}},
			{op: "rm", idx: []int{2}, err: wire.ErrState},
			{op: "alloc", name: "j", n: 1, err: wire.ErrNoResources},
		}},
		{"middle node leaves, later slots renumbered", []step{
			{op: "add", name: "n3", n: 2},
			{op: "alloc", name: "j", n: 2, nodes: []int{0, 0}},
			{op: "on", name: "k", n: 2, idx: []int{2}, nodes: []int{2, 2}},
			{op: "rm", idx: []int{1}},
			{op: "alloc", name: "j", n: 1, err: wire.ErrNoResources},
			{op: "rel", name: "j", idx: []int{1}},
			{op: "alloc", name: "j", n: 1, nodes: []int{0}},
			{op: "add", name: "node2", n: 1}, // the removed node's name may come back
			{op: "alloc", name: "j", n: 1, nodes: []int{3}},
		}},
		{"oversubscription skips removed nodes", []step{
			{op: "rm", idx: []int{0}},
			{op: "over", name: "j", n: 5, nodes: []int{1, 1, 1, 1, 1}},
		}},
		{"a removed node cannot be named", []step{
			{op: "rm", idx: []int{1}},
			{op: "on", name: "j", n: 1, idx: []int{1}, err: wire.ErrInvalid},
			{op: "on", name: "j", n: 1, idx: []int{0, 1}, err: wire.ErrInvalid},
			{op: "on", name: "j", n: 1, idx: []int{0}, nodes: []int{0}},
		}},
		{"names stay unique", []step{
			{op: "add", name: "node1", n: 1, err: wire.ErrExists},
			{op: "add", name: "", n: 1, err: wire.ErrInvalid},
			{op: "add", name: "x", n: 0, err: wire.ErrInvalid},
			{op: "rm", idx: []int{7}, err: wire.ErrInvalid},
		}},
		{"map by node over a grown table", []step{
			{op: "add", name: "n3", n: 2},
			{op: "rm", idx: []int{1}},
			{op: "bynode", name: "j", n: 4, nodes: []int{0, 2, 0, 2}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, grid(2, 2))
			for i, st := range tt.steps {
				var ps []Proc
				var err error
				switch st.op {
				case "add":
					var idx int
					idx, err = a.AddNode(Node{Name: st.name, Slots: st.n})
					if err == nil && idx != len(a.nodes)-1 {
						t.Fatalf("step %d: AddNode returned index %d, want %d", i, idx, len(a.nodes)-1)
					}
				case "rm":
					err = a.RemoveNode(st.idx[0])
					if err == nil && !a.Gone(st.idx[0]) {
						t.Fatalf("step %d: node %d not gone after RemoveNode", i, st.idx[0])
					}
				case "alloc":
					ps, err = a.Allocate(st.name, st.n, Options{})
				case "bynode":
					ps, err = a.Allocate(st.name, st.n, Options{MapBy: MapByNode})
				case "over":
					ps, err = a.Allocate(st.name, st.n, Options{Oversubscribe: true})
				case "on":
					ps, err = a.Allocate(st.name, st.n, Options{Nodes: st.idx})
				case "rel":
					ranks := make([]uint32, len(st.idx))
					for k, r := range st.idx {
						ranks[k] = uint32(r)
					}
					err = a.Release(st.name, ranks)
				}
				if st.err != nil {
					if !errors.Is(err, st.err) {
						t.Fatalf("step %d (%s %s): err %v, want %s", i, st.op, st.name, err, st.err)
					}
				} else if err != nil {
					t.Fatalf("step %d (%s %s): %v", i, st.op, st.name, err)
				}
				check(t, a)
				if st.nodes != nil {
					got := make([]int, len(ps))
					for k, p := range ps {
						got[k] = p.Node
						if a.Gone(p.Node) {
							t.Fatalf("step %d: process placed on removed node %d", i, p.Node)
						}
					}
					if !slices.Equal(got, st.nodes) {
						t.Fatalf("step %d (%s %s %d): nodes %v, want %v", i, st.op, st.name, st.n, got, st.nodes)
					}
				}
			}
		})
	}
}
