package comm

import (
	"context"
	"encoding/binary"
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// Collectives. Every member calls them in the same order (a communicator's
// collectives must not run concurrently); each call takes the next
// internal tag, so the messages of successive collectives never mix and
// never match user receives. A member that fails (a peer gone, a timeout)
// passes the error on along the tree instead of its data, so every
// member fails promptly rather than waiting for its timeout.

func (c *Comm) nextTag() int32 {
	c.seq++
	return -2 - int32(c.seq&0x3fffffff)
}

// csend sends a collective frame to dst, on the caller's goroutine.
func (c *Comm) csend(ctx context.Context, dst int, tag int32, data []byte) error {
	_, _, err := c.send(dst, tag, 0, data, true).Wait(ctx)
	return err
}

// cfail passes err on to dsts (best effort: they may be gone too).
func (c *Comm) cfail(ctx context.Context, dsts []int, tag int32, err error) {
	for _, d := range dsts {
		c.send(d, tag, flagError, errPayload(err), true).Wait(ctx)
	}
}

func (c *Comm) crecv(ctx context.Context, src int, tag int32) ([]byte, error) {
	b, _, err := c.recv(src, tag).Wait(ctx)
	return b, err
}

func (c *Comm) checkRoot(root int) error { return c.check(root, "root") }

// Barrier returns once every member has entered it: a fan-in to rank 0
// and a broadcast back along the binomial tree. That is 2(n-1) messages,
// against n·⌈log2 n⌉ for a dissemination barrier; with more processes
// than cores the message count, not the depth, sets the time.
func (c *Comm) Barrier(ctx context.Context) error {
	if c.freed.Load() {
		return c.errFreed()
	}
	if len(c.ranks) == 1 {
		return nil
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	tag := c.nextTag()
	_, err := c.fanIn(ctx, tag, 0, nil, func(acc, _ []byte, _ int) ([]byte, error) { return acc, nil })
	if c.me == 0 && err != nil {
		c.cfail(ctx, realKids(0, 0, len(c.ranks)), tag, err)
		return err
	}
	if _, berr := c.bcast(ctx, tag, 0, nil); berr != nil {
		return berr
	}
	return err
}

// Bcast returns root's data on every member (binomial tree).
func (c *Comm) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	return c.bcast(ctx, c.nextTag(), root, data)
}

func (c *Comm) bcast(ctx context.Context, tag int32, root int, data []byte) ([]byte, error) {
	return c.bcastTree(ctx, tag, root, data, false)
}

// bcastDecided broadcasts a decision already made (an agreement's
// answer): a member that has it keeps it, and passes it on to every child
// it can still reach, even when one of them is gone.
func (c *Comm) bcastDecided(ctx context.Context, tag int32, root int, data []byte) ([]byte, error) {
	return c.bcastTree(ctx, tag, root, data, true)
}

func (c *Comm) bcastTree(ctx context.Context, tag int32, root int, data []byte, decided bool) ([]byte, error) {
	n := len(c.ranks)
	v := vrank(c.me, root, n)
	kids := treeChildren(v, n)
	for i, k := range kids {
		kids[i] = realRank(k, root, n)
	}
	if v != 0 {
		b, err := c.crecv(ctx, realRank(treeParent(v), root, n), tag)
		if err != nil {
			c.cfail(ctx, kids, tag, err)
			return nil, err
		}
		data = b
	}
	for i, k := range kids {
		if err := c.csend(ctx, k, tag, data); err != nil && !decided {
			c.cfail(ctx, kids[i+1:], tag, err)
			return nil, err
		}
	}
	return data, nil
}

// fanIn runs a binomial reduction towards root: every member starts with
// its own value, folds in its children's (in ascending order of their
// subtrees, so the order is fixed for a given size and root) and sends the
// result to its parent. The root gets the result of all; others nil.
func (c *Comm) fanIn(ctx context.Context, tag int32, root int, own []byte, fold func(acc, child []byte, childV int) ([]byte, error)) ([]byte, error) {
	n := len(c.ranks)
	v := vrank(c.me, root, n)
	kids := treeChildren(v, n)
	slices.Reverse(kids)
	acc := own
	var err error
	for _, k := range kids {
		var b []byte
		if b, err = c.crecv(ctx, realRank(k, root, n), tag); err != nil {
			break
		}
		if acc, err = fold(acc, b, k); err != nil {
			break
		}
	}
	if v == 0 {
		return acc, err
	}
	parent := realRank(treeParent(v), root, n)
	if err != nil {
		c.cfail(ctx, []int{parent}, tag, err)
		return nil, err
	}
	return nil, c.csend(ctx, parent, tag, acc)
}

// Gather returns, at root, every member's data by rank (nil elsewhere).
func (c *Comm) Gather(ctx context.Context, root int, data []byte) ([][]byte, error) {
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	blob, err := c.gather(ctx, c.nextTag(), root, data)
	if err != nil || c.me != root {
		return nil, err
	}
	return c.unpackBlocks(blob, root)
}

// gather packs the blocks of a subtree as (length, bytes) in virtual rank
// order; a child's subtree follows its parent's blocks seamlessly.
func (c *Comm) gather(ctx context.Context, tag int32, root int, data []byte) ([]byte, error) {
	own := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	own = append(own, data...)
	return c.fanIn(ctx, tag, root, own, func(acc, child []byte, _ int) ([]byte, error) {
		return append(acc, child...), nil
	})
}

func (c *Comm) unpackBlocks(blob []byte, root int) ([][]byte, error) {
	n := len(c.ranks)
	out := make([][]byte, n)
	for v := range n {
		if len(blob) < 4 || int(binary.BigEndian.Uint32(blob)) > len(blob)-4 {
			return nil, wire.Errorf(wire.ErrMalformed, "comm: gathered data ends at block %d of %d", v, n)
		}
		l := int(binary.BigEndian.Uint32(blob))
		out[realRank(v, root, n)] = blob[4 : 4+l : 4+l]
		blob = blob[4+l:]
	}
	return out, nil
}

// Allgather returns every member's data by rank, on every member.
func (c *Comm) Allgather(ctx context.Context, data []byte) ([][]byte, error) {
	if c.freed.Load() {
		return nil, c.errFreed()
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	tag := c.nextTag()
	blob, err := c.gather(ctx, tag, 0, data)
	if c.me == 0 && err != nil {
		c.cfail(ctx, realKids(0, 0, len(c.ranks)), tag, err)
		return nil, err
	}
	if err != nil {
		// Our parent has the error; the broadcast will bring it back
		// to the other members.
		_, berr := c.bcast(ctx, tag, 0, nil)
		if berr == nil {
			berr = err
		}
		return nil, berr
	}
	if blob, err = c.bcast(ctx, tag, 0, blob); err != nil {
		return nil, err
	}
	return c.unpackBlocks(blob, 0)
}

func realKids(me, root, n int) []int {
	kids := treeChildren(vrank(me, root, n), n)
	for i, k := range kids {
		kids[i] = realRank(k, root, n)
	}
	return kids
}

// Reduce combines every member's slice element by element with op; the
// result is at root (nil elsewhere). All slices must have the same length.
// The combination order depends only on the size and root, so repeating a
// reduction gives bit-identical floats.
func Reduce[T Number](ctx context.Context, c *Comm, root int, op Op, in []T) ([]T, error) {
	if err := c.checkRoot(root); err != nil {
		return nil, err
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	out, err := reduce(ctx, c, c.nextTag(), root, op, in)
	if err != nil || c.me != root {
		return nil, err
	}
	return bytesSlice[T](out)
}

func reduce[T Number](ctx context.Context, c *Comm, tag int32, root int, op Op, in []T) ([]byte, error) {
	if err := combine(op, []T{}, []T{}); err != nil {
		return nil, err
	}
	acc := slices.Clone(in)
	out, err := c.fanIn(ctx, tag, root, sliceBytes(acc), func(_, child []byte, k int) ([]byte, error) {
		v, err := bytesSlice[T](child)
		if err == nil {
			err = combine(op, acc, v)
		}
		return sliceBytes(acc), err
	})
	return out, err
}

// Allreduce is Reduce with the result on every member: reduced at rank 0,
// then broadcast, so every member holds the very same bits.
func Allreduce[T Number](ctx context.Context, c *Comm, op Op, in []T) ([]T, error) {
	if c.freed.Load() {
		return nil, c.errFreed()
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	tag := c.nextTag()
	out, err := reduce(ctx, c, tag, 0, op, in)
	switch {
	case c.me == 0 && err != nil:
		c.cfail(ctx, realKids(0, 0, len(c.ranks)), tag, err)
		return nil, err
	case err != nil:
		if _, berr := c.bcast(ctx, tag, 0, nil); berr != nil {
			return nil, berr
		}
		return nil, err
	}
	if out, err = c.bcast(ctx, tag, 0, out); err != nil {
		return nil, err
	}
	return bytesSlice[T](out)
}
