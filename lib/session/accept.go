package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/dynrt/dynrt/lib/rc"
	"github.com/dynrt/dynrt/wire"
)

// Phase 3 (thesis listing 6.5): one call, Accept, for every member of the
// bound set, whether the runtime synchronises the members or they agree
// among themselves over a channel of their own (a lib/comm communicator),
// and a request handle to test or wait on.

// AcceptOptions complete an Accept. Every member of the bound set passes
// the same Bound, Root and Over; only the root passes NewSet.
type AcceptOptions struct {
	// Bound is the bound set the caller accepts for. Empty: the change's
	// only bound set, or (a change bound to several) the one holding the
	// caller.
	Bound string
	// Root is the rank (in the job) of the member that speaks for the
	// set: it names NewSet and talks to the runtime. nil means the lowest
	// member of the bound set's version at the announcement. It must be a
	// member; it is honoured with and without Over.
	Root *uint32
	// NewSet is the set the root built in phase 2 (SetAfter): an ADD or
	// a REPLACE needs one, a SUB may have none. Members other than the
	// root leave it zero.
	NewSet SetVersion
	// Over lets the members agree over their own channel instead of
	// being synchronised by the runtime: a *comm.Comm over the bound
	// set's version at the announcement (its members, and only they,
	// call Accept with it). Then only the root's request goes to the
	// runtime (docs/wire.md, "Phase 3": the alone form) and the answer
	// comes back over the channel. nil: every member sends its own
	// request and the daemons fence the members (the member form).
	Over Channel
	// Timeout bounds the whole accept, the wait for the end of the change
	// included (0: the ctx given to Accept only; the runtime gives up a
	// change that is not confirmed within its own limit anyway).
	Timeout time.Duration
	// NoBlock (member form only) asks the runtime not to wait for the new
	// processes of an ADD or REPLACE: the request then completes with
	// Status wire.RCPending once the change is accepted, and every member
	// calls Accept again in a later step (a new call) until it is
	// FINALIZED. The root's choice holds for every member, so all members
	// must do the same (as examples/c-synthetic's non-blocking accept,
	// libdynrt's dynrt_iaccept, does).
	NoBlock bool
}

// Channel is a group of processes that can agree without the runtime:
// lib/comm's *Comm implements it.
type Channel interface {
	// Agreement reserves the channel's next collective (called on the
	// caller's goroutine, in the same order on every member) and returns
	// the function that runs it from any goroutine: once every member
	// has entered, the member whose job rank is root runs decide, and
	// every member returns its result (the bytes, or the error).
	Agreement() func(ctx context.Context, root uint32, decide func(context.Context) ([]byte, error)) ([]byte, error)
}

type agreeFunc = func(ctx context.Context, root uint32, decide func(context.Context) ([]byte, error)) ([]byte, error)

// AcceptResult is what an accept gives every member of the set.
type AcceptResult struct {
	// Status is wire.RCFinalized: an accept is complete when its change
	// is. Only a process that must leave (Terminate) may get it earlier,
	// wire.RCPending, when a SUB still waits for other bound sets, and
	// every member with NoBlock while the new processes have not
	// confirmed.
	Status string
	// Terminate is set for the processes a SUB removes and for those a
	// REPLACE replaces: they must call Finalize and exit.
	Terminate bool
	// NewSet is the set to continue with (the one the root named).
	NewSet SetVersion
}

// AcceptRequest is an accept under way (the thesis's MPI request of a
// non-blocking accept).
type AcceptRequest struct {
	delta string
	done  chan struct{}
	res   AcceptResult
	err   error
}

// Accept starts the caller's part of phase 3 for the change delta and
// returns at once. Every member of the bound set (as it was when the
// change was announced) calls it with the same options; the request
// completes when the change is FINALIZED (the result) or ABORTED (an
// error matching wire.ErrAborted), or fails when ctx or o.Timeout ends
// first. The caller may go on working meanwhile and Test the request, or
// Wait for it. From the call on, QueryRC no longer reports the change to
// the caller (unless the request fails other than by an abort).
//
// Without o.Over the request is one rc.accept of the member form: the
// daemons fence the members, the root's accept goes to the runtime and
// every member gets its answer. With o.Over the members first meet on
// the channel, the root alone asks the runtime, and the answer is passed
// on over the channel.
func (s *Session) Accept(ctx context.Context, delta string, o AcceptOptions) *AcceptRequest {
	r := &AcceptRequest{delta: delta, done: make(chan struct{})}
	s.rc.take(canonical(delta), canonical(o.Bound))
	var agree agreeFunc
	if o.Over != nil {
		agree = o.Over.Agreement() // now: the members' collectives keep their order
	}
	go func() {
		defer close(r.done)
		if o.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, o.Timeout)
			defer cancel()
		}
		if o.Over == nil {
			r.res, r.err = s.acceptMember(ctx, delta, o)
		} else {
			r.res, r.err = s.acceptOver(ctx, delta, o, agree)
		}
		s.rc.took(delta, o.Bound, r.err)
	}()
	return r
}

// Test reports whether the request has completed, and then its outcome.
func (r *AcceptRequest) Test() (res AcceptResult, done bool, err error) {
	select {
	case <-r.done:
		return r.res, true, r.err
	default:
		return AcceptResult{}, false, nil
	}
}

// Wait waits until the request has completed and returns its outcome. A
// Wait that ctx ends leaves the request running.
func (r *AcceptRequest) Wait(ctx context.Context) (AcceptResult, error) {
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return AcceptResult{}, ctxErr(ctx, "session: wait for the accept of "+r.delta)
	}
}

// acceptMember is the member form: a blocking rc.accept. Every member
// gets the root's answer, and a root of another implementation may not
// block: then the answer is PENDING, and the member waits for the change
// to leave PENDING and (an ADD or a REPLACE) asks again, as every member
// does (docs/wire.md, "Phase 3": polling a PENDING change).
func (s *Session) acceptMember(ctx context.Context, delta string, o AcceptOptions) (AcceptResult, error) {
	req := &wire.RCAcceptReq{Delta: delta, Bound: o.Bound, Root: o.Root, Set: o.NewSet, Block: !o.NoBlock, TimeoutMS: timeoutMS(ctx, 0)}
	for {
		var rep wire.RCAcceptReply
		if err := s.call(ctx, wire.KindRCAccept, req, &rep); err != nil {
			return AcceptResult{}, err
		}
		res := AcceptResult{Status: rep.Status, NewSet: rep.Set, Terminate: rep.Terminate}
		if rep.Status != wire.RCPending || rep.Terminate || o.NoBlock {
			return res, nil
		}
		r, err := s.WaitRC(ctx, QueryOptions{Delta: delta}, func(r RC) bool { return r.Status != wire.RCPending })
		switch {
		case err != nil:
			return AcceptResult{}, err
		case r.Status == wire.RCAborted:
			return AcceptResult{}, wire.Errorf(wire.ErrAborted, "session: resource change %s was aborted: %s", r.Delta, r.Record.Reason)
		case r.Type == wire.RCSub:
			// Accepted by this set; the other bound sets have now too.
			res.Status = r.Status
			return res, nil
		}
	}
}

// acceptOver is the channel form: the members meet on o.Over, the root
// sends the alone form and the channel carries its answer.
func (s *Session) acceptOver(ctx context.Context, delta string, o AcceptOptions, agree agreeFunc) (AcceptResult, error) {
	rec, err := s.record(ctx, delta)
	if err != nil {
		return AcceptResult{}, err
	}
	// An aborted change still goes through the agreement: a member that
	// read it as announced waits there for the root's answer, and the
	// root's accept reports the abort to every member.
	ref, members, err := s.boundOf(ctx, &rec, o.Bound)
	if err != nil {
		return AcceptResult{}, err
	}
	root := members[0].Lo
	if o.Root != nil {
		if root = *o.Root; !members.Contains(root) {
			return AcceptResult{}, wire.Errorf(wire.ErrInvalid, "session: accept of %s: root %d is not a member of %s (members %s)", rec.Delta, root, ref, members)
		}
	}
	b, err := agree(ctx, root, func(ctx context.Context) ([]byte, error) {
		req := &wire.RCAcceptReq{Delta: rec.Delta, Bound: ref.Name, Root: &root, Alone: true, Set: o.NewSet, Block: true, TimeoutMS: timeoutMS(ctx, 0)}
		var rep wire.RCAcceptReply
		if err := s.call(ctx, wire.KindRCAccept, req, &rep); err != nil {
			return nil, err
		}
		return json.Marshal(acceptMsg{Status: rep.Status, Set: rep.Set})
	})
	if err != nil {
		return AcceptResult{}, err
	}
	var m acceptMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return AcceptResult{}, wire.Errorf(wire.ErrMalformed, "session: accept of %s: the root's answer: %v", rec.Delta, err)
	}
	return AcceptResult{Status: m.Status, NewSet: m.Set, Terminate: rc.Terminates(&rec, s.info.Rank, m.Status)}, nil
}

// acceptMsg is the root's answer as the channel carries it (small and
// rare: JSON).
type acceptMsg struct {
	Status string     `json:"status"`
	Set    SetVersion `json:"set"`
}
