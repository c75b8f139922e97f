package comm

import (
	"context"
	"encoding/json"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// AcceptRC is phase 3 of a resource change over a communicator (thesis
// listing 6.5), collective over c, whose members are the bound set's
// members at the announcement (c built over that version). The root alone
// records the accept with the runtime, naming in newSet the set it built
// in phase 2 ("name@version" or a name; "" is allowed for a SUB); the
// members first gather at the root (so the change cannot end before all
// take part, as with Accept's fence), and the answer is broadcast over c. The result is Accept's: Status PENDING for an ADD whose new
// processes have not confirmed yet (call again, all members), Terminate
// for the processes a SUB removes, and an error matching wire.ErrAborted on
// every member if the change was aborted. o.Root is ignored (root is the
// communicator rank).
func (c *Comm) AcceptRC(ctx context.Context, delta string, root int, newSet string, o session.AcceptOptions) (session.AcceptResult, error) {
	if err := c.checkRoot(root); err != nil {
		return session.AcceptResult{}, err
	}
	o.Root = nil
	s := c.e.s
	tag := c.nextTag()
	n := len(c.ranks)
	// Everyone has entered (and so has done its part of phase 2) before
	// the root speaks for the set: as with Accept's fence, the change
	// cannot end before every member takes part.
	fctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	_, err := c.fanIn(fctx, tag, root, nil, func(acc, _ []byte, _ int) ([]byte, error) { return acc, nil })
	if c.me == root {
		var res session.AcceptResult
		if err == nil {
			res, err = s.AcceptAsRoot(ctx, delta, newSet, o)
		}
		// A fresh limit: a blocking accept may have used up the first.
		bctx, bcancel := c.e.opCtx(ctx)
		defer bcancel()
		if err != nil {
			c.cfail(bctx, realKids(c.me, root, n), tag, err)
			return session.AcceptResult{}, err
		}
		b, _ := json.Marshal(acceptMsg{Status: res.Status, Set: res.NewSet})
		if _, err := c.bcast(bctx, tag, root, b); err != nil {
			return session.AcceptResult{}, err
		}
		return res, nil
	}
	// The answer may take as long as the root's blocking wait.
	bctx, bcancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok && o.Blocking && o.Timeout > 0 {
		bctx, bcancel = context.WithTimeout(ctx, o.Timeout+c.e.o.Timeout)
	} else if !ok && !o.Blocking {
		bctx, bcancel = c.e.opCtx(ctx)
	}
	defer bcancel()
	b, berr := c.bcast(bctx, tag, root, nil)
	if berr != nil {
		return session.AcceptResult{}, berr
	}
	if err != nil {
		return session.AcceptResult{}, err
	}
	var m acceptMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return session.AcceptResult{}, wire.Errorf(wire.ErrMalformed, "comm: accept of %s from the root: %w", delta, err)
	}
	return s.AcceptedByRoot(ctx, delta, session.AcceptResult{Status: m.Status, NewSet: m.Set}, o)
}

// acceptMsg is the root's answer as broadcast (small and rare: JSON).
type acceptMsg struct {
	Status string       `json:"status"`
	Set    wire.PsetRef `json:"set"`
}
