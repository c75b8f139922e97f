package session

import (
	"context"

	"github.com/dynrt/dynrt/wire"
)

// Set operations (thesis §6.3, listing 6.2). The master runs them one at a
// time and answers once every daemon holds the result, so the set can be
// used at once with any process's daemon.

// Operations of PsetOp (Definition 5, plus NULL for attributes only).
const (
	OpUnion        = wire.OpUnion
	OpDifference   = wire.OpDifference
	OpIntersection = wire.OpIntersection
	OpNull         = wire.OpNull
)

// PsetOpOptions complete a PsetOp (the info object of listing 6.2).
type PsetOpOptions struct {
	// Target names the result in mpi://app/<app>; the name of p1 makes a
	// new version of p1. Empty: the runtime names a new set. For OpNull
	// it names the set whose attributes change.
	Target string
	// Active sets mpi_ps_active of the result; nil inherits it from p1 (a
	// new set) or keeps it (an existing one).
	Active *bool
	// Hints set mpi_ps_sched_<key> attributes (keys without the prefix);
	// an empty value removes one.
	Hints map[string]string
}

// PsetOpResult describes the set an operation wrote.
type PsetOpResult struct {
	Name    string
	Version uint32
	Size    int
	Members wire.RankRanges
	// Updated lists the other sets the runtime changed with it: the
	// recursively affected sets (Definition 4) when p2 is a delta set.
	Updated []wire.PsetRef
}

// Ref names the exact membership the operation produced.
func (r PsetOpResult) Ref() SetVersion { return wire.PsetRef{Name: r.Name, Version: r.Version} }

// PsetOp computes op(p1, p2) and stores it (listing 6.2). Operands may be
// any set the caller can name, "name@version" for an earlier membership,
// mpi://SELF and mpi://SHARED included. An empty result is an error. When
// p2 is a delta set, the runtime applies the same operation to the sets
// that are recursively affected. A delta of a change that was aborted
// (ADD or SUB) is refused with an error matching wire.ErrAborted: the root
// then calls Accept without a new set, which reports the abort to every
// member.
func (s *Session) PsetOp(ctx context.Context, op, p1, p2 string, o PsetOpOptions) (PsetOpResult, error) {
	var rep wire.PsetOpReply
	req := &wire.PsetOpReq{Op: op, P1: p1, P2: p2, Target: o.Target, Active: o.Active, Hints: o.Hints}
	if err := s.call(ctx, wire.KindPsetOp, req, &rep); err != nil {
		return PsetOpResult{}, err
	}
	return PsetOpResult{Name: rep.Name, Version: rep.Version, Size: int(rep.Size), Members: rep.Members, Updated: rep.Updated}, nil
}

// DeletePset deletes a set the application created. Its versions stay
// readable by "name@version"; the predefined and delta sets cannot be
// deleted.
func (s *Session) DeletePset(ctx context.Context, name string) error {
	return s.call(ctx, wire.KindPsetDelete, &wire.PsetDeleteReq{Name: name}, nil)
}

// SplitOptions say how Split divides a set: set exactly one of Parts,
// Ranks and ByNode.
type SplitOptions struct {
	// Parts splits into that many parts in rank order, sizes differing by
	// at most one, larger parts first; 1 to the size of the set.
	Parts int
	// Ranks gives the parts: non-empty, disjoint, and together exactly the
	// members of the set.
	Ranks []wire.RankRanges
	// ByNode makes one part per node that holds members of the set, in
	// the DVM's node order.
	ByNode bool
	// Names of the parts, one per part. Without them part i is named
	// Target/<i>, or mpi://app/<app>/split-<n>/<i> without Target. A name
	// that exists gets a new version.
	Names  []string
	Target string
	// Active and Hints apply to every part as in PsetOpOptions; a new part
	// inherits mpi_ps_active and the hints of the split set.
	Active *bool
	Hints  map[string]string
}

// SplitPart is one set a Split made.
type SplitPart struct {
	Name    string
	Version uint32
	Epoch   uint32
	Active  bool
	Size    int
	Members wire.RankRanges
	Node    string // ByNode: the node of its members
}

// Ref names the exact membership of the part.
func (p SplitPart) Ref() SetVersion { return wire.PsetRef{Name: p.Name, Version: p.Version} }

// Split splits set (a name or "name@version"; mpi://SELF and mpi://SHARED
// are the caller's) into parts stored as sets in one step, and returns
// them in part order. Like PsetOp it returns once every daemon holds the
// parts. It changes no other set; a delta set cannot be split. Splitting
// the application set by node and binding a change to one part confines
// the change to that node's processes (docs/rc.md, "Bind a change to a
// sub-set").
func (s *Session) Split(ctx context.Context, set string, o SplitOptions) ([]SplitPart, error) {
	req := &wire.PsetOpReq{Op: wire.OpSplit, P1: set, Lists: o.Ranks, Names: o.Names, Target: o.Target, Active: o.Active, Hints: o.Hints}
	modes := 0
	if o.Parts != 0 {
		if o.Parts < 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "split %s: %d parts; want 1 to the size of the set", set, o.Parts)
		}
		req.Mode, req.K = wire.SplitParts, uint32(min(o.Parts, 1<<32-1))
		modes++
	}
	if len(o.Ranks) > 0 {
		req.Mode = wire.SplitRanks
		modes++
	}
	if o.ByNode {
		req.Mode = wire.SplitNode
		modes++
	}
	if modes != 1 {
		return nil, wire.Errorf(wire.ErrInvalid, "split %s: set exactly one of SplitOptions.Parts, Ranks and ByNode (%d set)", set, modes)
	}
	var rep wire.PsetOpReply
	if err := s.call(ctx, wire.KindPsetOp, req, &rep); err != nil {
		return nil, err
	}
	out := make([]SplitPart, len(rep.Parts))
	for i, p := range rep.Parts {
		out[i] = SplitPart{Name: p.Name, Version: p.Version, Epoch: p.Epoch, Active: p.Active, Size: int(p.Size), Members: p.Members}
		if i < len(rep.Nodes) {
			out[i].Node = rep.Nodes[i]
		}
	}
	return out, nil
}
