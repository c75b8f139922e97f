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
func (r PsetOpResult) Ref() wire.PsetRef { return wire.PsetRef{Name: r.Name, Version: r.Version} }

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
