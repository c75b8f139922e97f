package master

import (
	"fmt"
	"strings"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// Placement skips nodes that cannot take processes now: down nodes and
// suspect ones (a missed heartbeat, heartbeat.go). lib/alloc knows nothing
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
	var down, suspect []string
	for _, i := range want {
		if i < 0 || i >= len(s.nodes) {
			keep = append(keep, i) // alloc names the bad index
			continue
		}
		switch n := s.nodes[i]; {
		case !n.up:
			down = append(down, n.name)
		case n.suspect:
			suspect = append(suspect, n.name)
		default:
			keep = append(keep, i)
		}
	}
	if len(down)+len(suspect) == 0 {
		return opts, "", nil
	}
	var why []string
	if len(down) > 0 {
		why = append(why, "down: "+strings.Join(down, ", "))
	}
	if len(suspect) > 0 {
		why = append(why, "suspect: "+strings.Join(suspect, ", "))
	}
	skipped := "nodes " + strings.Join(why, "; ")
	if len(keep) == 0 {
		return opts, skipped, wire.Errorf(wire.ErrNoResources, "master: no node can take processes (%s)", skipped)
	}
	opts.Nodes = keep
	return opts, skipped, nil
}
