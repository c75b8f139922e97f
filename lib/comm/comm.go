package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/dynrt/dynrt/wire"
)

// Comm is a communicator: the members of one version of a process set,
// ranked 0..n-1 in the order of their job ranks, with a context id that
// keeps its messages apart from every other communicator's.
type Comm struct {
	e     *Endpoint
	ref   wire.PsetRef
	name  string // group name; "" for Self
	cid   uint64
	ranks []uint32 // job rank of each communicator rank, ascending
	me    int
	seq   uint32 // collectives so far (every member calls them in the same order)
	freed atomic.Bool
}

// New builds a communicator over the members of the set version ref. It is
// collective over those members: each calls it with the same ref and tag
// (and no two communicators with the same ref and tag may exist at once;
// the tag tells apart several communicators over one set). The context id
// comes from the runtime's group construction.
func (e *Endpoint) New(ctx context.Context, ref wire.PsetRef, tag string) (*Comm, error) {
	if e.isClosed() {
		return nil, wire.Errorf(wire.ErrClosed, "comm: endpoint closed")
	}
	ctx, cancel := e.opCtx(ctx)
	defer cancel()
	members, err := e.s.Members(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("comm: members of %s: %w", ref.String(), err)
	}
	ranks := members.Ranks()
	me, ok := slices.BinarySearch(ranks, e.me)
	if !ok {
		return nil, wire.Errorf(wire.ErrPermission, "comm: rank %d is not a member of %s", e.me, ref.String())
	}
	name := "comm:" + ref.String() + ":" + tag
	cid, err := e.s.GroupConstruct(ctx, name, ranks)
	if err != nil {
		return nil, fmt.Errorf("comm: communicator over %s: %w", ref.String(), err)
	}
	return &Comm{e: e, ref: ref, name: name, cid: cid, ranks: ranks, me: me}, nil
}

// Self is a communicator of the calling process alone; it needs no
// runtime call. Its context ids are local (top bit set) and never leave
// the process.
func (e *Endpoint) Self() *Comm {
	return &Comm{
		e: e, ref: wire.PsetRef{Name: "mpi://SELF"}, cid: 1<<63 | e.selfIDs.Add(1),
		ranks: []uint32{e.me},
	}
}

// Rank is the caller's rank in c.
func (c *Comm) Rank() int { return c.me }

// Size is the number of members.
func (c *Comm) Size() int { return len(c.ranks) }

// Set is the set version c was built over.
func (c *Comm) Set() wire.PsetRef { return c.ref }

// ContextID is the DVM-unique id of c (a local one for Self).
func (c *Comm) ContextID() uint64 { return c.cid }

// JobRank returns the job rank of communicator rank r.
func (c *Comm) JobRank(r int) uint32 { return c.ranks[r] }

// RankOf returns the communicator rank of a job rank.
func (c *Comm) RankOf(jobRank uint32) (int, bool) { return slices.BinarySearch(c.ranks, jobRank) }

// Free releases c (the runtime's group destruct) and drops the messages
// queued for it. Later operations on c fail.
func (c *Comm) Free(ctx context.Context) error {
	if c.freed.Swap(true) {
		return wire.Errorf(wire.ErrState, "comm: communicator %d freed twice", c.cid)
	}
	c.e.q.drop(c.cid, c.errFreed())
	if c.name == "" {
		return nil
	}
	ctx, cancel := c.e.opCtx(ctx)
	defer cancel()
	return c.e.s.GroupDestruct(ctx, c.name)
}

func (c *Comm) errFreed() error {
	return wire.Errorf(wire.ErrState, "comm: communicator %d over %s is freed", c.cid, c.ref.String())
}

func (c *Comm) check(rank int, what string) error {
	if c.freed.Load() {
		return c.errFreed()
	}
	if rank < 0 || rank >= len(c.ranks) {
		return wire.Errorf(wire.ErrInvalid, "comm: %s rank %d outside 0..%d", what, rank, len(c.ranks)-1)
	}
	return nil
}

// Point to point.

// AnySource and AnyTag widen a receive to every source or every (user) tag.
const (
	AnySource = -1
	AnyTag    = -1
)

// Status tells a receiver where a message came from.
type Status struct{ Source, Tag int }

// Request is a non-blocking operation.
type Request struct {
	c    *Comm
	recv *recvReq  // a receive
	send *outFrame // a send to a peer
	p    *peer
	err  error // failed before it started
	what string
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Send sends data to rank dst with tag (0..MaxTag). It returns once the
// message has been handed to the connection (or queued, for the caller
// itself): the receiver need not have posted a receive. data may be
// reused afterwards.
func (c *Comm) Send(ctx context.Context, dst, tag int, data []byte) error {
	if err := checkTag(tag); err != nil {
		return err
	}
	_, _, err := c.send(dst, int32(tag), 0, data, true).Wait(ctx)
	return err
}

// Recv receives a message from src (or AnySource) with tag (or AnyTag).
func (c *Comm) Recv(ctx context.Context, src, tag int) ([]byte, Status, error) {
	return c.Irecv(src, tag).Wait(ctx)
}

// Isend starts a send; data must stay unchanged until Wait returns.
// Messages to one destination leave in the order of the Isend/Send calls.
func (c *Comm) Isend(dst, tag int, data []byte) *Request {
	if err := checkTag(tag); err != nil {
		return &Request{c: c, err: err}
	}
	return c.send(dst, int32(tag), 0, data, false)
}

// Irecv posts a receive. Receives match messages in the order they are
// posted.
func (c *Comm) Irecv(src, tag int) *Request {
	if tag != AnyTag {
		if err := checkTag(tag); err != nil {
			return &Request{c: c, err: err}
		}
	}
	return c.recv(src, int32(tag))
}

func checkTag(tag int) error {
	if tag < 0 || tag > MaxTag {
		return wire.Errorf(wire.ErrInvalid, "comm: tag %d outside 0..%d", tag, MaxTag)
	}
	return nil
}

// send starts a send of a frame; inline flushes on the caller's goroutine
// when nobody else is writing to dst and it is connected (the common, fast
// case).
func (c *Comm) send(dst int, tag int32, flags uint8, data []byte, inline bool) *Request {
	if err := c.check(dst, "destination"); err != nil {
		return &Request{c: c, err: err}
	}
	if len(data) > MaxMessage {
		return &Request{c: c, err: wire.Errorf(wire.ErrTooLarge, "comm: message of %d bytes (limit %d)", len(data), MaxMessage)}
	}
	to := c.ranks[dst]
	if to == c.e.me {
		if c.e.isClosed() {
			return &Request{c: c, err: wire.Errorf(wire.ErrClosed, "comm: endpoint closed")}
		}
		c.e.q.arrive(c.cid, message{src: to, tag: tag, data: slices.Clone(data), isErr: flags&flagError != 0})
		return &Request{c: c}
	}
	p, err := c.e.peer(to)
	if err != nil {
		return &Request{c: c, err: err}
	}
	f := &outFrame{h: header{ctx: c.cid, src: c.e.me, tag: tag, flags: flags, n: uint32(len(data))}, data: data, done: make(chan struct{})}
	r := &Request{c: c, send: f, p: p, what: fmt.Sprintf("send to rank %d (job rank %d)", dst, to)}
	if p.enqueue(f) {
		// Inline only over a connection: a dial looks the peer's
		// address up through the runtime and may wait long (the peer's
		// node hung), and the caller must be free to give up with its
		// context (Wait withdraws the frame).
		if inline && p.connected() {
			p.flush()
		} else if !c.e.track(p.flush) {
			p.flush() // closing: it fails at once
		}
	}
	return r
}

func (c *Comm) recv(src int, tag int32) *Request {
	if c.freed.Load() {
		return &Request{c: c, err: c.errFreed()}
	}
	from := int64(anyRank)
	what := "receive from any rank"
	if src != AnySource {
		if err := c.check(src, "source"); err != nil {
			return &Request{c: c, err: err}
		}
		from = int64(c.ranks[src])
		what = fmt.Sprintf("receive from rank %d (job rank %d)", src, from)
	}
	r := newRecv(c.cid, from, tag)
	c.e.q.post(r)
	if from != anyRank && uint32(from) != c.e.me {
		// Connect now so that a peer that is gone is noticed.
		if p, err := c.e.peer(uint32(from)); err == nil {
			p.connect()
		}
	}
	return &Request{c: c, recv: r, what: what}
}

func (r *Request) done() chan struct{} {
	switch {
	case r.recv != nil:
		return r.recv.done
	case r.send != nil:
		return r.send.done
	}
	return closedChan
}

// Test reports whether the operation has completed (Wait then returns at
// once).
func (r *Request) Test() bool {
	select {
	case <-r.done():
		return true
	default:
		return false
	}
}

// Wait waits for the operation and returns, for a receive, the message and
// its status. A receive that gives up (ctx, or the endpoint's timeout) is
// withdrawn, so no later message is lost to it.
func (r *Request) Wait(ctx context.Context) ([]byte, Status, error) {
	if r.err != nil {
		return nil, Status{}, r.err
	}
	select {
	case <-r.done():
	default:
		ctx, cancel := r.c.e.opCtx(ctx)
		defer cancel()
		select {
		case <-r.done():
		case <-ctx.Done():
			if r.recv != nil && !r.c.e.q.cancel(r.recv) {
				break // completed meanwhile
			}
			if r.send != nil && !r.p.withdraw(r.send) {
				// Being written: the write has its own deadline.
				<-r.send.done
				break
			}
			code := wire.ErrTimeout
			if errors.Is(ctx.Err(), context.Canceled) {
				code = wire.ErrCanceled
			}
			return nil, Status{}, wire.Errorf(code, "comm: %s: %w", r.what, ctx.Err())
		}
	}
	if r.send != nil {
		return nil, Status{}, r.send.err
	}
	if r.recv == nil {
		return nil, Status{}, nil
	}
	if r.recv.err != nil {
		return nil, Status{}, fmt.Errorf("comm: %s: %w", r.what, r.recv.err)
	}
	m := r.recv.m
	src, _ := r.c.RankOf(m.src)
	if m.isErr {
		return nil, Status{Source: src, Tag: int(m.tag)}, payloadErr(m.data)
	}
	return m.data, Status{Source: src, Tag: int(m.tag)}, nil
}

// WaitAll waits for every request and returns their errors joined.
func WaitAll(ctx context.Context, reqs ...*Request) error {
	var errs []error
	for _, r := range reqs {
		if _, _, err := r.Wait(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SendSlice sends a numeric slice.
func SendSlice[T Number](ctx context.Context, c *Comm, dst, tag int, v []T) error {
	return c.Send(ctx, dst, tag, sliceBytes(v))
}

// RecvSlice receives a numeric slice sent by SendSlice with the same T.
func RecvSlice[T Number](ctx context.Context, c *Comm, src, tag int) ([]T, Status, error) {
	b, st, err := c.Recv(ctx, src, tag)
	if err != nil {
		return nil, st, err
	}
	v, err := bytesSlice[T](b)
	return v, st, err
}
