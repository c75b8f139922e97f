package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Failure changes: under a job's shrink (or replace) failure policy the
// runtime turns lost processes into an ordinary change with a cause
// (docs/rc.md "Failures as changes"). A malleable program handles it on
// its usual path, with two differences: the lost ranks take no part, and
// a communication that involved them may have failed first. These helpers
// let the program find that change after such an error, and break out of
// communication that waits for a survivor that has already gone to handle
// it.

// Failure reports whether the runtime made the change because processes
// were lost.
func (r RC) Failure() bool {
	return r.Record.Cause != nil && r.Record.Cause.Kind == wire.CauseFailure
}

// Lost returns the ranks a failure change lost (nil for any other change).
func (r RC) Lost() wire.RankRanges {
	if !r.Failure() {
		return nil
	}
	return r.Record.Cause.Ranks
}

// FailureDue says whether r is a failure change the caller still has to
// handle: announced (or PENDING, waiting for other sets or new processes)
// and not among those it has handled (handled may be nil).
func FailureDue(r RC, handled func(delta string) bool) bool {
	if !r.Failure() || r.Status != wire.RCAnnounced && r.Status != wire.RCPending {
		return false
	}
	return handled == nil || !handled(r.Delta)
}

// WaitFailure waits until a failure change bound to the set named bound
// ("" for the application set) is announced that handled does not know
// (handled may be nil), and returns it. A program calls it after a
// communication error that a lost peer may have caused (lib/comm reports
// wire.ErrClosed): the runtime announces the change once it has noticed
// the loss, so the wait ends with it; ctx bounds the wait for the case
// that the error had another cause, or the job's policy is not shrink.
func (s *Session) WaitFailure(ctx context.Context, bound string, handled func(delta string) bool) (RC, error) {
	return s.WaitRC(ctx, QueryOptions{Bound: bound}, func(r RC) bool { return FailureDue(r, handled) })
}

// LostError is the cause of a context WatchFailure canceled: the failure
// change that was announced.
type LostError struct{ RC RC }

func (e *LostError) Error() string {
	return fmt.Sprintf("session: ranks %s were lost (failure change %s)", e.RC.Lost(), e.RC.Delta)
}

// WatchFailure returns a context derived from ctx that is canceled, with
// a *LostError as its cause (context.Cause), as soon as WaitFailure would
// return a change. Pass it to the communication of a step: a survivor
// that waits for a peer which has itself stopped to handle the loss is
// released then, instead of waiting for its timeout (survivors do not all
// see the loss through their own messages). stop ends the watch; call it
// when the step is done.
func (s *Session) WatchFailure(ctx context.Context, bound string, handled func(delta string) bool) (wctx context.Context, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r, err := s.WaitFailure(wctx, bound, handled); err == nil {
			cancel(&LostError{RC: r})
		}
	}()
	return wctx, func() {
		cancel(context.Canceled)
		<-done
	}
}

// LostCause returns the failure change that canceled ctx (a context of
// WatchFailure), if that is why it ended.
func LostCause(ctx context.Context) (RC, bool) {
	var le *LostError
	if !errors.As(context.Cause(ctx), &le) {
		return RC{}, false
	}
	return le.RC, true
}

// FailureBehind returns the failure change behind err, the error of work
// run under wctx (a context of WatchFailure, or any context): the change
// that ended wctx, one err carries (*LostError), or, when err is what a
// lost peer causes (wire.ErrClosed: its connection ended; ErrTimeout;
// ErrAborted: a fence or group it did not enter; ErrCanceled: a
// collective a survivor left when its own watch ended), the one
// WaitFailure finds within wait. Otherwise, or when none comes, it returns
// err: no loss explains it.
func (s *Session) FailureBehind(ctx, wctx context.Context, err error, bound string, handled func(delta string) bool, wait time.Duration) (RC, error) {
	if r, ok := LostCause(wctx); ok {
		return r, nil
	}
	var le *LostError
	if errors.As(err, &le) {
		return le.RC, nil
	}
	if !errors.Is(err, wire.ErrClosed) && !errors.Is(err, wire.ErrTimeout) && !errors.Is(err, wire.ErrAborted) && !errors.Is(err, wire.ErrCanceled) {
		return RC{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	r, werr := s.WaitFailure(wctx, bound, handled)
	if werr != nil {
		return RC{}, fmt.Errorf("%w (and no failure change followed within %v)", err, wait)
	}
	return r, nil
}

// SetAfter is phase 2 of the change r for the set named set, as its root
// runs it: the new version of set that the members continue with (its
// String is the newSet of Accept). An ADD is UNION(set, delta), a SUB
// DIFFERENCE(set, delta), a REPLACE both: DIFFERENCE with its replaced
// set, then UNION with its delta. (For a failure change the DIFFERENCE
// changes nothing: the runtime has taken the dead out already.)
func (s *Session) SetAfter(ctx context.Context, set string, r RC) (SetVersion, error) {
	o := PsetOpOptions{Target: set}
	var res PsetOpResult
	var err error
	switch r.Type {
	case wire.RCAdd:
		res, err = s.PsetOp(ctx, OpUnion, set, r.Delta, o)
	case wire.RCSub:
		res, err = s.PsetOp(ctx, OpDifference, set, r.Delta, o)
	case wire.RCReplace:
		// The union first: the difference first would pass through an
		// empty set (which no set can be) when every member is replaced.
		if res, err = s.PsetOp(ctx, OpUnion, set, r.Delta, o); err == nil {
			res, err = s.PsetOp(ctx, OpDifference, set, r.Record.OutSet, o)
		}
	default:
		return SetVersion{}, wire.Errorf(wire.ErrInvalid, "session: change %s of type %q: no set to build", r.Delta, r.Type)
	}
	if err != nil {
		return SetVersion{}, err
	}
	return res.Ref(), nil
}
