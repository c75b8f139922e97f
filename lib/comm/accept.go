package comm

import (
	"context"

	"github.com/dynrt/dynrt/wire"
)

// Agreement reserves the next collective of c for one agreement (it
// implements session.Channel): every member calls it where it would call
// any other collective, in the same order. The function it returns runs
// the agreement, from any goroutine, alongside later collectives of c:
// the members first gather at the member whose job rank is root (so that
// root decides only once every member has entered), root runs decide, and
// its result, the bytes or the error, is broadcast to every member. Phase
// 3 over a communicator uses it (session.Session.Accept with
// AcceptOptions.Over). The gathering is bounded by the endpoint's timeout
// unless ctx has a deadline; the wait for the decision by ctx only, since
// deciding may take as long as the change it accepts.
func (c *Comm) Agreement() func(ctx context.Context, root uint32, decide func(context.Context) ([]byte, error)) ([]byte, error) {
	tag := c.nextTag()
	return func(ctx context.Context, root uint32, decide func(context.Context) ([]byte, error)) ([]byte, error) {
		return c.agree(ctx, tag, root, decide)
	}
}

func (c *Comm) agree(ctx context.Context, tag int32, root uint32, decide func(context.Context) ([]byte, error)) ([]byte, error) {
	if c.freed.Load() {
		return nil, c.errFreed()
	}
	r, ok := c.RankOf(root)
	if !ok {
		return nil, wire.Errorf(wire.ErrInvalid, "comm: rank %d of the job is not a member of the communicator over %s", root, c.ref.String())
	}
	fctx, cancel := c.e.opCtx(ctx)
	_, err := c.fanIn(fctx, tag, r, nil, func(acc, _ []byte, _ int) ([]byte, error) { return acc, nil })
	cancel()
	if c.me != r {
		b, berr := c.bcastDecided(ctx, tag, r, nil)
		if berr != nil {
			return nil, berr
		}
		return b, err
	}
	var b []byte
	if err == nil {
		b, err = decide(ctx)
	}
	// A fresh limit: deciding may have used up the first.
	bctx, bcancel := c.e.opCtx(ctx)
	defer bcancel()
	if err != nil {
		c.cfail(bctx, realKids(c.me, r, len(c.ranks)), tag, err)
		return nil, err
	}
	// The runtime has the decision: a member gone meanwhile does not
	// make it the root's error (the application would not record a
	// change that was made).
	return c.bcastDecided(bctx, tag, r, b)
}
