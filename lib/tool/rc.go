package tool

import (
	"context"
	"errors"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Resource changes (DESIGN §5) and process set operations, as tools make
// them. The master answers every request; an RC is named by its delta set
// (mpi://rte/<app>/rc/<n>).

// RequestRC asks for a resource change of req.Job (a job namespace or an
// application name; empty means the only live job). Without req.Wait the
// reply comes once phase 1 is done (status ANNOUNCED); with it, once the
// change is settled: ABORTED, or FINALIZED with every process of the
// change started (ADD) or gone and its slots freed (SUB). A change that
// ends ABORTED is returned with an error matching wire.ErrAborted. A
// second request while a change of the job is in flight fails with
// wire.ErrBusy naming it, unless req.Queue is set.
func (c *Client) RequestRC(ctx context.Context, req wire.RCRequest) (wire.RC, error) {
	if req.Requester == "" {
		req.Requester = wire.ByTool
	}
	var rc wire.RC
	err := c.conn.Call(ctx, wire.KindRCRequest, &req, &rc)
	return rc, err
}

// RC returns the record of one change: status, bound sets, ranks and the
// time of every step.
func (c *Client) RC(ctx context.Context, delta string) (wire.RC, error) {
	var rep wire.RCQueryReply
	if err := c.conn.Call(ctx, wire.KindRCQuery, &wire.RCQueryReq{Delta: delta}, &rep); err != nil {
		return wire.RC{}, err
	}
	if rep.RC == nil {
		return wire.RC{}, wire.Errorf(wire.ErrNotFound, "tool: no resource change %s", delta)
	}
	return *rep.RC, nil
}

// RCs lists every change of job (all jobs when job is empty), settled
// ones included, oldest first.
func (c *Client) RCs(ctx context.Context, job string) ([]wire.RC, error) {
	var l wire.RCList
	err := c.conn.Call(ctx, wire.KindRCList, &wire.RCListReq{Job: job, All: true}, &l)
	return l.RCs, err
}

// CancelRC aborts a change that is not FINALIZED yet (a SUB only before
// its first accept) and returns its record, status ABORTED. Its new
// processes are killed and its slots freed in the background; WaitRC with
// status "" waits for that.
func (c *Client) CancelRC(ctx context.Context, delta, reason string) (wire.RC, error) {
	var rc wire.RC
	err := c.conn.Call(ctx, wire.KindRCCancel, &wire.RCCancelReq{Delta: delta, Reason: reason}, &rc)
	return rc, err
}

// WaitRC waits until the change reaches status (wire.RCAnnounced,
// RCPending, RCFinalized or RCAborted), or, for status "", until it is
// settled (see RequestRC). It listens to the master's rc.state events, so
// it returns as soon as the change gets there. Waiting for PENDING or
// FINALIZED when the change is ABORTED returns the record with an error
// matching wire.ErrAborted; waiting for ABORTED when it is FINALIZED
// returns one matching wire.ErrState.
func (c *Client) WaitRC(ctx context.Context, delta, status string) (wire.RC, error) {
	rank, ok := statusRank[status]
	if status != "" && (!ok || status == wire.RCNull) {
		return wire.RC{}, wire.Errorf(wire.ErrInvalid, "tool: cannot wait for status %q (want %s, %s, %s, %s or nothing)",
			status, wire.RCAnnounced, wire.RCPending, wire.RCFinalized, wire.RCAborted)
	}
	return c.WaitRCFunc(ctx, delta, func(rc wire.RC) (bool, error) {
		switch {
		case status == "":
			if rc.Settled && rc.Status == wire.RCAborted {
				return true, abortedErr(rc)
			}
			return rc.Settled, nil
		case rc.Status == status:
			return true, nil
		case rc.Status == wire.RCAborted:
			return true, abortedErr(rc)
		case status == wire.RCAborted && rc.Status == wire.RCFinalized:
			return true, wire.Errorf(wire.ErrState, "tool: resource change %s is FINALIZED and cannot be ABORTED any more", rc.Delta)
		}
		return statusRank[rc.Status] >= rank, nil
	})
}

// unsubscribe ends the subscription of a wait that has ended, even when
// the wait ended because ctx did.
func (c *Client) unsubscribe(ctx context.Context, id uint64) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsubTimeout)
	defer cancel()
	_ = c.Unsubscribe(uctx, id)
}

// unsubTimeout bounds the clean-up call of a wait that has ended.
const unsubTimeout = 5 * time.Second

var statusRank = map[string]int{
	wire.RCNull: 0, wire.RCAnnounced: 1, wire.RCPending: 2, wire.RCFinalized: 3, wire.RCAborted: 4,
}

func abortedErr(rc wire.RC) error {
	return wire.Errorf(wire.ErrAborted, "tool: resource change %s was aborted: %s", rc.Delta, rc.Reason)
}

// WaitRCFunc calls done with the change's record now and after every
// update until done returns true (or an error), and returns the last
// record. done runs on the caller's goroutine.
func (c *Client) WaitRCFunc(ctx context.Context, delta string, done func(wire.RC) (bool, error)) (wire.RC, error) {
	// Subscribe first, then read the current record: an update cannot fall
	// between the two.
	updates := make(chan wire.RC, 64)
	overflow := make(chan struct{}, 1)
	// "rc.": rc.state and rc.update, every update of the record.
	id, err := c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{"rc."}}, func(ev wire.Event) {
		if ev.RC == nil || ev.RC.Delta != delta {
			return
		}
		select {
		case updates <- *ev.RC:
		default: // the waiter is behind: it re-reads the record
			select {
			case overflow <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		return wire.RC{}, err
	}
	defer c.unsubscribe(ctx, id)
	cur, err := c.RC(ctx, delta)
	if err != nil {
		return cur, err
	}
	for {
		if ok, err := done(cur); ok || err != nil {
			return cur, err
		}
		select {
		case rc := <-updates:
			if rc.Seq >= cur.Seq {
				cur = rc
			}
		case <-overflow:
			if cur, err = c.RC(ctx, delta); err != nil {
				return cur, err
			}
		case <-c.conn.Done():
			return cur, wire.Errorf(wire.ErrClosed, "tool: lost the master while waiting for %s", delta)
		case <-ctx.Done():
			code := wire.ErrCanceled
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				code = wire.ErrTimeout
			}
			return cur, wire.Errorf(code, "tool: resource change %s is still %s: %w", delta, cur.Status, ctx.Err())
		}
	}
}

// WaitQueued returns the record of the change a queued request became:
// queued is the master's immediate answer to a request with Queue and
// without Wait (status NULL, no delta yet). The change is recognised by
// its job, requester id and request time, which the master keeps from the
// request. It fails with wire.ErrAborted when the job ends first; a
// request the master refuses when its turn comes (logged there) is not
// reported, so bound ctx.
func (c *Client) WaitQueued(ctx context.Context, queued wire.RC) (wire.RC, error) {
	if queued.Delta != "" {
		return queued, nil
	}
	mine := func(rc *wire.RC) bool {
		return rc != nil && rc.Job == queued.Job && rc.RequesterID == queued.RequesterID && rc.Times.Requested == queued.Times.Requested
	}
	found := make(chan wire.RC, 1)
	ended := make(chan string, 1)
	id, err := c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{wire.EvRCState, wire.EvJobState}}, func(ev wire.Event) {
		switch {
		case ev.Kind == wire.EvRCState && mine(ev.RC):
			select {
			case found <- *ev.RC:
			default:
			}
		case ev.Kind == wire.EvJobState && ev.Job == queued.Job && jobOver(ev.State):
			select {
			case ended <- ev.State:
			default:
			}
		}
	})
	if err != nil {
		return wire.RC{}, err
	}
	defer c.unsubscribe(ctx, id)
	// Subscribed first: a change announced from now on is an event, one
	// announced before is in the list.
	rcs, err := c.RCs(ctx, queued.Job)
	if err != nil {
		return wire.RC{}, err
	}
	for i := range rcs {
		if mine(&rcs[i]) {
			return rcs[i], nil
		}
	}
	select {
	case rc := <-found:
		return rc, nil
	case st := <-ended:
		return wire.RC{}, wire.Errorf(wire.ErrAborted, "tool: job %s ended (%s) before its queued %s started", queued.Job, st, queued.Type)
	case <-c.conn.Done():
		return wire.RC{}, wire.Errorf(wire.ErrClosed, "tool: lost the master while waiting for the queued %s of job %s", queued.Type, queued.Job)
	case <-ctx.Done():
		code := wire.ErrCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = wire.ErrTimeout
		}
		return wire.RC{}, wire.Errorf(code, "tool: the queued %s of job %s has not started: %w", queued.Type, queued.Job, ctx.Err())
	}
}

func jobOver(state string) bool {
	return state == wire.JobStateDone || state == wire.JobStateFailed || state == wire.JobStateKilled
}

// PsetOp asks the master for a process set operation on req.Job's sets
// (tools have no mpi://SELF or mpi://SHARED). The reply comes after every
// daemon holds the result and the recursively updated sets.
func (c *Client) PsetOp(ctx context.Context, req wire.PsetOpReq) (wire.PsetOpReply, error) {
	var rep wire.PsetOpReply
	err := c.conn.Call(ctx, wire.KindPsetOp, &req, &rep)
	return rep, err
}

// DeletePset deletes a set the application created (its versions stay
// readable by version).
func (c *Client) DeletePset(ctx context.Context, job, name string) error {
	return c.conn.Call(ctx, wire.KindPsetDelete, &wire.PsetDeleteReq{Job: job, Name: name}, nil)
}
