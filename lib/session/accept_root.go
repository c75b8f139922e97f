package session

import (
	"context"

	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/wire"
)

// Accept over the application's own communicator (thesis listing 6.5):
// the members of the bound set already share a channel (lib/comm), so the
// runtime need not fence them nor publish the root's answer for them. The
// root calls AcceptAsRoot alone and passes the answer on; every other
// member hands what it got to AcceptedByRoot. Both count the call the way
// Accept does, so any member can be the root of a later (polling) call.

// AcceptAsRoot records the accept of delta with the runtime for the bound
// set, on behalf of its members, without synchronising them: the caller
// has done that over its own channel. Arguments and result are those of
// Accept; o.Root, if set, must be the caller. An aborted change returns an
// error matching wire.ErrAborted.
func (s *Session) AcceptAsRoot(ctx context.Context, delta, newSet string, o AcceptOptions) (res AcceptResult, err error) {
	defer func() { s.rc.took(delta, o.Bound, err) }()
	rec, err := s.record(ctx, delta)
	if err != nil {
		return AcceptResult{}, err
	}
	if rec.Status == wire.RCAborted {
		return AcceptResult{}, wire.Errorf(wire.ErrAborted, "session: resource change %s was aborted: %s", rec.Delta, rec.Reason)
	}
	ref, _, err := s.boundOf(ctx, &rec, o.Bound)
	if err != nil {
		return AcceptResult{}, err
	}
	me := s.info.Rank
	if o.Root != nil && *o.Root != me {
		return AcceptResult{}, wire.Errorf(wire.ErrInvalid, "session: AcceptAsRoot called by rank %d for root %d", me, *o.Root)
	}
	req := &wire.RCAcceptReq{Delta: rec.Delta, Bound: ref.Name, Call: s.rc.next(rec.Delta + "|" + ref.Name), Block: o.Blocking, Root: &me, Alone: true}
	if newSet != "" {
		req.Set = wire.PsetRef{Name: newSet}
	}
	if o.Blocking {
		req.TimeoutMS = timeoutMS(ctx, o.Timeout)
	}
	var rep wire.RCAcceptReply
	if err := s.call(ctx, wire.KindRCAccept, req, &rep); err != nil {
		return AcceptResult{}, err
	}
	return AcceptResult{
		Status: rep.Status, NewSet: rep.Set,
		Terminate: daemon.Terminates(&rec, me, rep.Status),
	}, nil
}

// AcceptedByRoot completes, on a member other than the root, an accept
// the root made with AcceptAsRoot: res is the root's answer as the
// application passed it on. It counts the call and sets Terminate for the
// caller (a process the SUB removes). Errors the root got are the
// application's to pass on; this never asks the runtime for the decision.
func (s *Session) AcceptedByRoot(ctx context.Context, delta string, res AcceptResult, o AcceptOptions) (_ AcceptResult, err error) {
	defer func() { s.rc.took(delta, o.Bound, err) }()
	rec, err := s.record(ctx, delta)
	if err != nil {
		return AcceptResult{}, err
	}
	ref, _, err := s.boundOf(ctx, &rec, o.Bound)
	if err != nil {
		return AcceptResult{}, err
	}
	s.rc.next(rec.Delta + "|" + ref.Name)
	res.Terminate = daemon.Terminates(&rec, s.info.Rank, res.Status)
	return res, nil
}
