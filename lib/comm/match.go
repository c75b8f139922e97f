package comm

import (
	"slices"
	"sync"
)

// The matching engine: messages that arrive are matched by (context,
// source, tag) against the receives posted so far, in posting order, else
// queued; a new receive takes the oldest queued message that matches. As
// every source's messages arrive in sending order, this gives MPI's
// non-overtaking rule. It does no I/O: the endpoint feeds it.

const anyRank = -1

// message is one received frame.
type message struct {
	src   uint32 // job rank
	tag   int32
	data  []byte
	isErr bool // a collective's error (data is errPayload)
}

// recvReq is a posted receive. done is closed once m or err is set.
type recvReq struct {
	ctx  uint64
	src  int64 // job rank, or anyRank
	tag  int32 // AnyTag matches user tags (>= 0) only
	done chan struct{}
	m    message
	err  error
}

func newRecv(ctx uint64, src int64, tag int32) *recvReq {
	return &recvReq{ctx: ctx, src: src, tag: tag, done: make(chan struct{})}
}

func (r *recvReq) matches(m *message) bool {
	if r.src != anyRank && uint32(r.src) != m.src {
		return false
	}
	if r.tag == AnyTag {
		return m.tag >= 0
	}
	return r.tag == m.tag
}

type matcher struct {
	mu     sync.Mutex
	unexp  map[uint64][]message
	posted map[uint64][]*recvReq
	dead   map[uint32]error // sources that can send no more
	closed error
}

func newMatcher() *matcher {
	return &matcher{unexp: map[uint64][]message{}, posted: map[uint64][]*recvReq{}, dead: map[uint32]error{}}
}

// arrive hands a message of context ctx to the oldest matching receive or
// queues it.
func (q *matcher) arrive(ctx uint64, m message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, r := range q.posted[ctx] {
		if r.matches(&m) {
			q.posted[ctx] = slices.Delete(q.posted[ctx], i, i+1)
			r.m = m
			close(r.done)
			return
		}
	}
	q.unexp[ctx] = append(q.unexp[ctx], m)
}

// post takes the oldest queued match or registers r. A receive from a
// source known to be gone fails at once once nothing queued matches.
func (q *matcher) post(r *recvReq) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.unexp[r.ctx] {
		if r.matches(&q.unexp[r.ctx][i]) {
			r.m = q.unexp[r.ctx][i]
			q.unexp[r.ctx] = slices.Delete(q.unexp[r.ctx], i, i+1)
			if len(q.unexp[r.ctx]) == 0 {
				delete(q.unexp, r.ctx)
			}
			close(r.done)
			return
		}
	}
	if q.closed != nil {
		r.err = q.closed
		close(r.done)
		return
	}
	if r.src != anyRank {
		if err := q.dead[uint32(r.src)]; err != nil {
			r.err = err
			close(r.done)
			return
		}
	}
	q.posted[r.ctx] = append(q.posted[r.ctx], r)
}

// cancel withdraws a receive that is still waiting; false if it has
// completed meanwhile.
func (q *matcher) cancel(r *recvReq) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.posted[r.ctx], r)
	if i < 0 {
		return false
	}
	q.posted[r.ctx] = slices.Delete(q.posted[r.ctx], i, i+1)
	return true
}

// fail records that src can send no more: its waiting receives and later
// ones (that nothing queued matches) fail with err.
func (q *matcher) fail(src uint32, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead[src] == nil {
		q.dead[src] = err
	}
	for ctx, list := range q.posted {
		q.posted[ctx] = slices.DeleteFunc(list, func(r *recvReq) bool {
			if r.src == int64(src) {
				r.err = q.dead[src]
				close(r.done)
				return true
			}
			return false
		})
	}
}

// drop forgets a freed context: its queued messages and waiting receives
// (which fail with err).
func (q *matcher) drop(ctx uint64, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.unexp, ctx)
	for _, r := range q.posted[ctx] {
		r.err = err
		close(r.done)
	}
	delete(q.posted, ctx)
}

// close fails every waiting and later receive that nothing queued matches.
func (q *matcher) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = err
	for ctx, list := range q.posted {
		for _, r := range list {
			r.err = err
			close(r.done)
		}
		delete(q.posted, ctx)
	}
}
