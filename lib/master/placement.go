package master

import (
	"fmt"
	"strings"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// Placement skips nodes that cannot take processes now: down nodes,
// suspect ones (a missed heartbeat, heartbeat.go), and nodes that are
// joining or leaving the DVM or have left it (grow.go). lib/alloc knows nothing
// of node states; the master narrows Options.Nodes to the live nodes, so
// every placement (launch, ADD, PMI spawn, any --map-by) goes to live
// nodes while they have room, and fails with a message naming the nodes
// left out when they do not.

// allocate is alloc.Allocate restricted to the live nodes.
func (s *state) allocate(name string, n int, opts alloc.Options) ([]alloc.Proc, error) {
	opts, skipped, err := s.liveOnly(opts)
	if err != nil {
		return nil, err
	}
	ps, err := s.alloc.Allocate(name, n, opts)
	if err != nil && skipped != "" {
		return nil, fmt.Errorf("%w (%s)", err, skipped)
	}
	for _, p := range ps {
		// The invariant of grow.go, checked where it could break: nothing
		// lands on a node that is not fully in the DVM.
		if nd := s.nodes[p.Node]; nd.pending || nd.leaving || nd.gone {
			s.misplaced++
			s.log.Error("master: process placed on a node that is not in the DVM", "job", name, "rank", p.Rank, "node", nd.name)
		}
	}
	return ps, err
}

// liveOnly narrows opts.Nodes (empty: every node) to the nodes that are up
// and not suspect, and says which it left out.
func (s *state) liveOnly(opts alloc.Options) (alloc.Options, string, error) {
	want := opts.Nodes
	if len(want) == 0 {
		want = make([]int, len(s.nodes))
		for i := range want {
			want[i] = i
		}
	}
	var keep []int
	var down, suspect, moving []string
	for _, i := range want {
		if i < 0 || i >= len(s.nodes) {
			keep = append(keep, i) // alloc names the bad index
			continue
		}
		switch n := s.nodes[i]; {
		case n.gone:
			// Left for good: not worth naming, unless asked for by index.
			if len(opts.Nodes) > 0 {
				keep = append(keep, i) // alloc says it has left
			}
		case n.pending, n.leaving:
			moving = append(moving, n.name)
		case !n.up:
			down = append(down, n.name)
		case n.suspect:
			suspect = append(suspect, n.name)
		default:
			keep = append(keep, i)
		}
	}
	if len(down)+len(suspect)+len(moving) == 0 && len(keep) == len(want) {
		return opts, "", nil
	}
	var why []string
	if len(down) > 0 {
		why = append(why, "down: "+strings.Join(down, ", "))
	}
	if len(suspect) > 0 {
		why = append(why, "suspect: "+strings.Join(suspect, ", "))
	}
	if len(moving) > 0 {
		why = append(why, "joining or leaving the DVM: "+strings.Join(moving, ", "))
	}
	skipped := ""
	if len(why) > 0 {
		skipped = "nodes " + strings.Join(why, "; ")
	}
	if len(keep) == 0 {
		if skipped == "" {
			return opts, skipped, wire.Errorf(wire.ErrNoResources, "master: no node can take processes (the ones asked for have left the DVM)")
		}
		return opts, skipped, wire.Errorf(wire.ErrNoResources, "master: no node can take processes (%s)", skipped)
	}
	opts.Nodes = keep
	return opts, skipped, nil
}
