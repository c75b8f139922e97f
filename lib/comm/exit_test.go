package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// In-process endpoints with real listeners: n endpoints of one job (job
// ranks 0..n-1) that find each other through a map instead of the session.
type world struct {
	mu    sync.Mutex
	addrs map[uint32][]byte
	eps   []*Endpoint
}

func newWorld(t *testing.T, n int, o Options) *world {
	t.Helper()
	w := &world{addrs: map[uint32][]byte{}}
	lookup := func(ctx context.Context, rank uint32) ([]byte, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if a, ok := w.addrs[rank]; ok {
			return a, nil
		}
		return nil, wire.Errorf(wire.ErrNotFound, "no rank %d", rank)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	for r := range n {
		e, err := listen(context.Background(), uint32(r), "j.1", o, lookup)
		if err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		w.addrs[uint32(r)] = []byte(e.addr.String())
		w.mu.Unlock()
		w.eps = append(w.eps, e)
	}
	t.Cleanup(func() {
		for _, e := range w.eps {
			e.Close()
		}
	})
	return w
}

// comm is the communicator of all the world's endpoints, as seen by rank r.
func (w *world) comm(r int) *Comm {
	ranks := make([]uint32, len(w.eps))
	for i := range ranks {
		ranks[i] = uint32(i)
	}
	return &Comm{e: w.eps[r], ref: wire.PsetRef{Name: "w"}, name: "", cid: 42, ranks: ranks, me: r}
}

func (w *world) conns(r int, peer uint32) int {
	e := w.eps[r]
	e.mu.Lock()
	p := e.peers[peer]
	e.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// TestSendThenExit is the regression test of the fan-in race: the parent
// posts a receive from a child (which connects to the child at once) while
// the child sends to the parent and closes its endpoint right away. The
// two dials cross; the receive must still get the message, not "it closed
// the connection". Many rounds, as the race is one of timing.
func TestSendThenExit(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(fmt.Sprintf("tcp=%v", tcp), func(t *testing.T) {
			const rounds, children = 60, 6
			for round := range rounds {
				w := newWorld(t, 1+children, Options{TCPOnly: tcp})
				ctx := context.Background()
				var wg sync.WaitGroup
				for ch := 1; ch <= children; ch++ {
					wg.Go(func() {
						c := w.comm(ch)
						if err := c.Send(ctx, 0, 3, []byte{byte(ch)}); err != nil {
							t.Errorf("round %d: child %d: %v", round, ch, err)
						}
						w.eps[ch].Close()
					})
				}
				parent := w.comm(0)
				reqs := make([]*Request, children)
				for ch := 1; ch <= children; ch++ {
					reqs[ch-1] = parent.Irecv(ch, 3)
				}
				for i, r := range reqs {
					b, _, err := r.Wait(ctx)
					if err != nil || len(b) != 1 || int(b[0]) != i+1 {
						t.Errorf("round %d: receive from child %d: %q, %v", round, i+1, b, err)
					}
				}
				wg.Wait()
				if t.Failed() {
					return
				}
				for _, e := range w.eps {
					e.Close()
				}
			}
		})
	}
}

// TestOneConnection: two endpoints that dial each other at the same moment
// end up with one connection between them, on both sides, and messages
// flow both ways over it.
func TestOneConnection(t *testing.T) {
	for round := range 40 {
		w := newWorld(t, 2, Options{})
		ctx := context.Background()
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() {
				c := w.comm(r)
				rq := c.Irecv(1-r, 0)
				if err := c.Send(ctx, 1-r, 0, []byte{byte(r)}); err != nil {
					t.Errorf("round %d: rank %d: send: %v", round, r, err)
				}
				if b, _, err := rq.Wait(ctx); err != nil || len(b) != 1 || int(b[0]) != 1-r {
					t.Errorf("round %d: rank %d: receive %q, %v", round, r, b, err)
				}
			})
		}
		wg.Wait()
		for r := range 2 {
			if n := w.conns(r, uint32(1-r)); n != 1 {
				t.Errorf("round %d: rank %d has %d connections to rank %d", round, r, n, 1-r)
			}
		}
		for _, e := range w.eps {
			e.Close()
		}
	}
}

// TestExitWithUnreadData: a process that sends a large message and exits
// while its peer is still sending to it (so that its socket holds data it
// never read) must not lose the tail of its own message: closing a TCP
// socket with unread data resets the connection and drops what it has
// not transmitted yet.
func TestExitWithUnreadData(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(fmt.Sprintf("tcp=%v", tcp), func(t *testing.T) {
			for round := range 5 {
				w := newWorld(t, 2, Options{TCPOnly: tcp})
				ctx := context.Background()
				a, b := w.comm(0), w.comm(1)
				big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
				// Connect first, so that both directions share a connection.
				if err := a.Send(ctx, 1, 1, nil); err != nil {
					t.Fatal(err)
				}
				if _, _, err := b.Recv(ctx, 0, 1); err != nil {
					t.Fatal(err)
				}
				flood := a.Isend(1, 2, big) // never received by b
				rq := a.Irecv(1, 3)
				if err := b.Send(ctx, 0, 3, big); err != nil {
					t.Fatal(err)
				}
				w.eps[1].Close()
				got, _, err := rq.Wait(ctx)
				if err != nil || !bytes.Equal(got, big) {
					t.Fatalf("round %d: received %d of %d bytes: %v", round, len(got), len(big), err)
				}
				if _, _, err := flood.Wait(ctx); err != nil && !errors.Is(err, wire.ErrClosed) {
					t.Errorf("round %d: send to an endpoint that closed: %v", round, err)
				}
				w.eps[0].Close()
			}
		})
	}
}

// TestSendWhileDialing: a send to a peer without a connection yet returns
// with its context while the dial still waits for the peer's address (the
// runtime's lookup hangs with the peer's node). Before, the send dialed on
// the caller's goroutine, under the endpoint's own timeout: heat's
// TestBuddyHungNode saw a survivor stay in a collective long after the
// failure watch had canceled its context, and the recovery wait for it in
// vain.
func TestSendWhileDialing(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	var mu sync.Mutex
	addrs := map[uint32][]byte{}
	lookup := func(ctx context.Context, rank uint32) ([]byte, error) {
		if rank == 1 {
			select { // rank 1's node hangs
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return addrs[rank], nil
	}
	o := Options{Timeout: time.Minute}
	var eps []*Endpoint
	for r := range 2 {
		e, err := listen(context.Background(), uint32(r), "j.1", o, lookup)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		mu.Lock()
		addrs[uint32(r)] = []byte(e.addr.String())
		mu.Unlock()
		eps = append(eps, e)
	}
	c := &Comm{e: eps[0], ref: wire.PsetRef{Name: "w"}, cid: 42, ranks: []uint32{0, 1}, me: 0}
	for _, tc := range []struct {
		name string
		send func(ctx context.Context) error
	}{
		{"Send", func(ctx context.Context) error { return c.Send(ctx, 1, 3, []byte("x")) }},
		{"collective", func(ctx context.Context) error { return c.csend(ctx, 1, c.nextTag(), []byte("x")) }},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- tc.send(ctx) }()
		time.Sleep(50 * time.Millisecond) // in the dial by now
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, wire.ErrCanceled) {
				t.Errorf("%s: %v, want the cancellation", tc.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still sending 10 s after its context was canceled (the dial waits for the address)", tc.name)
		}
	}
}
