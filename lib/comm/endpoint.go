package comm

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// AddrKey is the session key under which an endpoint publishes its address.
const AddrKey = "dynrt.comm.addr"

// DefaultTimeout limits one operation whose ctx has no deadline.
const DefaultTimeout = 60 * time.Second

// Options complete Open.
type Options struct {
	Logger *slog.Logger
	// Timeout limits one operation when ctx has no deadline (0:
	// DefaultTimeout): a peer that neither answers nor fails makes the
	// operation fail after it, never hang.
	Timeout time.Duration
	// TCPOnly uses TCP even to peers on this host (tests, measurements).
	TCPOnly bool
	// Addr is the address peers on other hosts dial; "" means
	// $DYNRT_NODE_ADDR, else the host name.
	Addr string
}

// EnvNodeAddr is the variable the node daemon sets to the node's address
// (lib/procenv.NodeAddr).
const EnvNodeAddr = "DYNRT_NODE_ADDR"

// Endpoint is this process's messaging endpoint: a listener on an abstract
// unix socket (no file to clean up) and one on TCP (for peers on other
// hosts), its address published through the session. Every communicator
// of the process shares it, and with it one connection per peer.
type Endpoint struct {
	s    *session.Session
	log  *slog.Logger
	o    Options
	me   uint32
	job  string
	addr address
	q    *matcher
	// lookup fetches a peer's published address (the session's Get;
	// a map in the in-process tests).
	lookup func(ctx context.Context, rank uint32) ([]byte, error)

	lns     []net.Listener
	wg      sync.WaitGroup
	life    context.Context // canceled by Close: stops dials in progress
	stop    context.CancelFunc
	selfIDs atomic.Uint64

	mu     sync.Mutex
	peers  map[uint32]*peer
	hellos map[net.Conn]bool // accepted, hello not read yet
	closed bool
}

// Open starts the endpoint of the process of s and publishes its address
// (Put and Commit under AddrKey).
func Open(ctx context.Context, s *session.Session, o Options) (*Endpoint, error) {
	lookup := func(ctx context.Context, rank uint32) ([]byte, error) {
		return s.Get(ctx, rank, AddrKey, session.Wait())
	}
	e, err := listen(ctx, s.Rank(), s.Job(), o, lookup)
	if err != nil {
		return nil, err
	}
	e.s = s
	err = s.Put(AddrKey, []byte(e.addr.String()))
	if err == nil {
		err = s.Commit(ctx)
	}
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("comm: publish the endpoint: %w", err)
	}
	return e, nil
}

// listen starts an endpoint of job rank me that finds its peers with
// lookup.
func listen(ctx context.Context, me uint32, job string, o Options, lookup func(context.Context, uint32) ([]byte, error)) (*Endpoint, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	// Peers on other hosts dial host: the node's address the daemon
	// chose (DYNRT_NODE_ADDR: the DVM's --net, or the address that
	// reaches the master), else the host name. Peers with the same host
	// use the unix socket.
	host := cmp.Or(o.Addr, os.Getenv(EnvNodeAddr))
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("comm: hostname: %w", err)
		}
	}
	e := &Endpoint{log: o.Logger, o: o, me: me, job: job, lookup: lookup, q: newMatcher(), peers: map[uint32]*peer{}, hellos: map[net.Conn]bool{}}
	e.addr.host = host
	e.life, e.stop = context.WithCancel(context.Background())
	if _, err := rand.Read(e.addr.token[:]); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	// A leading @ names a socket in Linux's abstract namespace: it goes
	// away with the process and leaves no file behind.
	// (Its name is public, in /proc/net/unix: other random bytes than
	// the token's.)
	var id [8]byte
	rand.Read(id[:])
	e.addr.unix = "@dynrt-comm-" + hex.EncodeToString(id[:])
	ul, err := lc.Listen(ctx, "unix", e.addr.unix)
	if err != nil {
		e.stop()
		return nil, wire.Errorf(wire.ErrInternal, "comm: listen on %s: %w", e.addr.unix, err)
	}
	tl, err := lc.Listen(ctx, "tcp", ":0")
	if err != nil {
		ul.Close()
		e.stop()
		return nil, wire.Errorf(wire.ErrInternal, "comm: listen on TCP: %w", err)
	}
	e.addr.port = tl.Addr().(*net.TCPAddr).Port
	e.lns = []net.Listener{ul, tl}
	for _, l := range e.lns {
		e.wg.Add(1)
		go e.acceptLoop(l)
	}
	return e, nil
}

// Close closes every connection and listener; operations still waiting
// fail with wire.ErrClosed. What was sent before is not lost: each
// connection is shut down for writing, then read until the peer closes
// its end (at most a few seconds for a peer that does not).
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.stop()
	peers := make([]*peer, 0, len(e.peers))
	for _, p := range e.peers {
		peers = append(peers, p)
	}
	for c := range e.hellos {
		c.Close()
	}
	e.mu.Unlock()
	errClosed := wire.Errorf(wire.ErrClosed, "comm: endpoint closed")
	e.q.close(errClosed)
	for _, l := range e.lns {
		l.Close()
	}
	for _, p := range peers {
		p.stop(errClosed, true)
	}
	e.wg.Wait()
	return nil
}

func (e *Endpoint) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// opCtx bounds an operation by the endpoint's timeout unless ctx has a
// deadline.
func (e *Endpoint) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, e.o.Timeout)
}

func (e *Endpoint) peer(rank uint32) (*peer, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, wire.Errorf(wire.ErrClosed, "comm: endpoint closed")
	}
	p := e.peers[rank]
	if p == nil {
		p = newPeer(e, rank)
		e.peers[rank] = p
	}
	return p, nil
}

func (e *Endpoint) acceptLoop(l net.Listener) {
	defer e.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if e.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: try again soon.
			e.log.Warn("comm: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			c.Close()
			return
		}
		e.hellos[c] = true
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.admit(c)
		}()
	}
}

// admit checks a new connection's hello, answers it and reads from it.
func (e *Endpoint) admit(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(e.o.Timeout))
	br := bufio.NewReaderSize(c, 64<<10)
	h, err := readHello(br)
	e.mu.Lock()
	delete(e.hellos, c)
	e.mu.Unlock()
	if err == nil && (h.token != e.addr.token || h.job != e.job) {
		err = wire.Errorf(wire.ErrUnauthorized, "comm: hello from rank %d of job %q with a wrong token or job", h.rank, h.job)
	}
	if err == nil && h.rank == e.me {
		err = wire.Errorf(wire.ErrInvalid, "comm: hello from my own rank")
	}
	var p *peer
	if err == nil {
		p, err = e.peer(h.rank)
	}
	if err == nil {
		c.SetReadDeadline(time.Time{})
		err = p.admit(c)
	}
	if err != nil {
		e.log.Debug("comm: refused a connection", "err", err)
		c.Close()
		return
	}
	p.read(c, br)
}

// errRetry: the peer refused our dial because its own dial to us is the
// connection the pair keeps.
var errRetry = errors.New("the peer is connecting to us")

// dial connects to rank: its address from the session (waiting until it
// has opened its endpoint), unix on the same host, else TCP.
func (e *Endpoint) dial(ctx context.Context, rank uint32) (net.Conn, *bufio.Reader, error) {
	v, err := e.lookup(ctx, rank)
	if err != nil {
		return nil, nil, fmt.Errorf("comm: address of rank %d: %w", rank, err)
	}
	a, err := parseAddress(string(v))
	if err != nil {
		return nil, nil, err
	}
	network, where := "unix", a.unix
	if a.host != e.addr.host || e.o.TCPOnly {
		host := a.host
		if host == e.addr.host {
			host = "127.0.0.1"
		}
		network, where = "tcp", net.JoinHostPort(host, strconv.Itoa(a.port))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, where)
	if err != nil {
		return nil, nil, wire.Errorf(wire.ErrClosed, "comm: connect to rank %d at %s: %w", rank, where, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	br := bufio.NewReaderSize(c, 64<<10)
	var ok [1]byte
	_, err = c.Write(hello{token: a.token, rank: e.me, job: e.job}.encode())
	if err == nil {
		_, err = io.ReadFull(br, ok[:])
	}
	if err == nil && ok[0] == helloRetry {
		c.Close()
		return nil, nil, errRetry
	}
	if err == nil && ok[0] != helloOK {
		err = errors.New("refused")
	}
	if err != nil {
		c.Close()
		return nil, nil, wire.Errorf(wire.ErrClosed, "comm: hello to rank %d at %s: %w", rank, where, err)
	}
	c.SetDeadline(time.Time{})
	return c, br, nil
}

// A peer is another process and the connection to it. A pair of
// processes keeps one connection: when both dial at once, the dial of the
// lower rank wins and the other is refused before it carries any frame.
// (Should a second connection exist all the same, this side sends on the
// first one and reads from both.) Frames to send are queued and written
// by one flusher at a time, so that they leave in order.
//
// The peer is gone once a connection ends (it closes its connections only
// when it closes its endpoint or exits), a write fails, or it cannot be
// reached: sends fail from then on. Receives from it fail only once every
// connection to it has ended, so that the frames it sent before leaving,
// still in a socket buffer, are delivered first.
type peer struct {
	e     *Endpoint
	rank  uint32
	ready chan struct{} // closed once a connection is attached

	mu       sync.Mutex
	conn     net.Conn   // the one this side sends on
	all      []net.Conn // open connections, each read by a reader
	q        []*outFrame
	flushing bool
	dialing  bool  // a dial of ours is under way
	err      error // set once: the peer is gone, sends fail
}

func newPeer(e *Endpoint, rank uint32) *peer {
	return &peer{e: e, rank: rank, ready: make(chan struct{})}
}

type outFrame struct {
	h    header
	data []byte
	done chan struct{}
	err  error
}

// lingerMax bounds how long closing waits for peers to read what it sent
// (see stop).
const lingerMax = 5 * time.Second

// admit answers the hello of an accepted connection c and attaches it,
// unless the peer has failed or this side, being the lower rank, has a
// connection or a dial of its own (the one the pair keeps).
func (p *peer) admit(c net.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	ans := byte(helloOK)
	if p.e.me < p.rank && (p.conn != nil || p.dialing) {
		ans = helloRetry
	}
	// Answer under the lock: once attached, c may carry frames of ours,
	// and the dialer reads the answer first. (One byte on a fresh
	// connection: the write does not block.)
	c.SetWriteDeadline(time.Now().Add(p.e.o.Timeout))
	_, err := c.Write([]byte{ans})
	c.SetWriteDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("comm: answer the hello of rank %d: %w", p.rank, err)
	}
	if ans != helloOK {
		return fmt.Errorf("comm: rank %d dialed while we dial it: ours is kept", p.rank)
	}
	p.attachLocked(c)
	return nil
}

func (p *peer) attachLocked(c net.Conn) {
	p.all = append(p.all, c)
	if p.conn == nil {
		p.conn = c
		close(p.ready)
	}
}

// read delivers the frames of c until it ends.
func (p *peer) read(c net.Conn, br *bufio.Reader) {
	hb := make([]byte, headerLen)
	for {
		h, data, err := readFrame(br, hb)
		if err != nil {
			if err == io.EOF {
				err = errors.New("it closed the connection")
			}
			p.ended(c, wire.Errorf(wire.ErrClosed, "comm: rank %d: %w", p.rank, err))
			return
		}
		if h.src != p.rank {
			err := wire.Errorf(wire.ErrMalformed, "comm: rank %d sent a frame as rank %d", p.rank, h.src)
			p.fail(err)
			p.ended(c, err)
			return
		}
		p.e.q.arrive(h.ctx, message{src: h.src, tag: h.tag, data: data, isErr: h.flags&flagError != 0})
	}
}

// goneLocked records err as the reason the peer is gone (the first one
// wins) and takes the frames waiting to be sent (the caller fails them
// after unlocking); it returns the open connections, those frames and
// the recorded reason. Called with p.mu held.
func (p *peer) goneLocked(err error) ([]net.Conn, []*outFrame, error) {
	var q []*outFrame
	if p.err == nil {
		p.err = err
		q, p.q = p.q, nil
	}
	return slices.Clone(p.all), q, p.err
}

func failFrames(q []*outFrame, err error) {
	for _, f := range q {
		f.err = err
		close(f.done)
	}
}

// ended drops a connection whose reader has stopped, after delivering all
// it had read; receives from the peer fail once none is left.
func (p *peer) ended(c net.Conn, err error) {
	p.mu.Lock()
	_, q, err := p.goneLocked(err)
	p.all = slices.DeleteFunc(p.all, func(x net.Conn) bool { return x == c })
	if p.conn == c {
		p.conn = nil
	}
	last := len(p.all) == 0
	p.mu.Unlock()
	c.Close()
	failFrames(q, err)
	if last {
		if !p.e.isClosed() {
			p.e.log.Debug("comm: peer gone", "rank", p.rank, "err", err)
		}
		p.e.q.fail(p.rank, err)
	}
}

// fail marks the peer gone at once: its connections closed (whatever they
// hold unread is lost: a peer that sends garbage or stops reading), its
// frames and receives failed, later ones too.
func (p *peer) fail(err error) {
	p.mu.Lock()
	conns, q, err := p.goneLocked(err)
	p.mu.Unlock()
	failFrames(q, err)
	for _, c := range conns {
		c.Close()
	}
	if len(conns) == 0 {
		p.e.q.fail(p.rank, err)
	}
	// Else the readers of conns end and report it (ended).
}

// stop marks the peer gone for sending but lets the readers deliver what
// the peer has sent: they end at its end of the connection, or after
// lingerMax. With closeWrite (our endpoint closing), our end is shut down
// for writing first: the peer reads our last frames, then the end of the
// connection, and closes its end, which ends our reader. Closing a socket
// that still holds unread data would reset the connection and could drop
// frames of ours not transmitted yet; the readers drain it first.
func (p *peer) stop(err error, closeWrite bool) {
	p.mu.Lock()
	conns, q, err := p.goneLocked(err)
	p.mu.Unlock()
	failFrames(q, err)
	grace := min(p.e.o.Timeout, lingerMax)
	for _, c := range conns {
		if cw, ok := c.(interface{ CloseWrite() error }); ok && closeWrite {
			cw.CloseWrite()
		} else if closeWrite {
			c.Close()
			continue
		}
		c.SetReadDeadline(time.Now().Add(grace))
	}
	if len(conns) == 0 {
		p.e.q.fail(p.rank, err)
	}
}

// connected says whether the peer has a connection to write to.
func (p *peer) connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn != nil
}

// enqueue queues f; true if the caller must flush (nobody else is).
func (p *peer) enqueue(f *outFrame) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		f.err = p.err
		close(f.done)
		return false
	}
	p.q = append(p.q, f)
	if p.flushing {
		return false
	}
	p.flushing = true
	return true
}

// withdraw takes f back if it has not been taken for writing yet.
func (p *peer) withdraw(f *outFrame) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.q, f)
	if i < 0 {
		return false
	}
	p.q = slices.Delete(p.q, i, i+1)
	return true
}

// connect makes sure there is a connection to the peer (without sending),
// so that a receive from it notices when it is gone.
func (p *peer) connect() {
	p.mu.Lock()
	if p.conn != nil || p.flushing || p.err != nil {
		p.mu.Unlock()
		return
	}
	p.flushing = true
	p.mu.Unlock()
	if !p.e.track(p.flush) {
		p.flush() // closing: it fails at once
	}
}

// track runs f in a goroutine that Close waits for, unless Close has
// begun: a WaitGroup must not grow from zero while Close waits on it.
// Goroutines already tracked may start others with wg.Add directly.
func (e *Endpoint) track(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// flush writes the queued frames until the queue is empty, connecting
// first if needed. Only one flush runs at a time (the flushing flag).
func (p *peer) flush() {
	for {
		p.mu.Lock()
		if p.err != nil {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		conn := p.conn
		if conn == nil {
			p.mu.Unlock()
			if !p.dial() {
				p.mu.Lock()
				p.flushing = false
				p.mu.Unlock()
				return
			}
			continue
		}
		q := p.q
		p.q = nil
		if len(q) == 0 {
			p.flushing = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		bufs := make(net.Buffers, 0, 2*len(q))
		hdrs := make([]byte, headerLen*len(q))
		for i, f := range q {
			hb := hdrs[i*headerLen : (i+1)*headerLen]
			f.h.put(hb)
			bufs = append(bufs, hb)
			if len(f.data) > 0 {
				bufs = append(bufs, f.data)
			}
		}
		conn.SetWriteDeadline(time.Now().Add(p.e.o.Timeout))
		_, err := bufs.WriteTo(conn)
		timeout := false
		if err != nil {
			err = wire.Errorf(wire.ErrClosed, "comm: send to rank %d: %w", p.rank, err)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				timeout = true
				err = wire.Errorf(wire.ErrTimeout, "comm: send to rank %d: no progress in %v", p.rank, p.e.o.Timeout)
			}
		}
		failFrames(q, err)
		switch {
		case timeout:
			p.fail(err) // it does not read: what it sent would not help
		case err != nil:
			p.stop(err, false) // it is leaving: deliver what it sent before
		}
	}
}

// dial connects to the peer; false (and the peer failed) if it cannot.
// true also when the peer's own dial won meanwhile.
func (p *peer) dial() bool {
	ctx, cancel := context.WithTimeout(p.e.life, p.e.o.Timeout)
	defer cancel()
	backoff := time.Millisecond
	for {
		if p.e.isClosed() {
			p.fail(wire.Errorf(wire.ErrClosed, "comm: endpoint closed"))
			return false
		}
		p.mu.Lock()
		if p.err != nil || p.conn != nil {
			ok := p.err == nil
			p.mu.Unlock()
			return ok
		}
		p.dialing = true
		p.mu.Unlock()
		c, br, err := p.e.dial(ctx, p.rank)
		p.mu.Lock()
		p.dialing = false
		if err == nil && p.err == nil {
			// Attach in the same critical section as dialing ends: a
			// hello of the peer sees either one or the other.
			p.attachLocked(c)
			p.mu.Unlock()
			p.e.wg.Add(1)
			go func() {
				defer p.e.wg.Done()
				p.read(c, br)
			}()
			return true
		}
		p.mu.Unlock()
		if err == nil { // failed meanwhile
			c.Close()
			return false
		}
		if errors.Is(err, errRetry) {
			// The peer (a lower rank) is dialing us: wait for its
			// connection, asking again now and then in case its dial
			// failed.
			select {
			case <-p.ready:
			case <-time.After(backoff):
				backoff = min(2*backoff, 100*time.Millisecond)
			case <-ctx.Done():
			}
			if ctx.Err() == nil {
				continue
			}
			err = ctx.Err()
		}
		if !errors.Is(err, wire.ErrClosed) && !errors.Is(err, wire.ErrTimeout) {
			code := wire.ErrClosed
			if ctx.Err() != nil && p.e.life.Err() == nil {
				code = wire.ErrTimeout
			}
			err = wire.Errorf(code, "comm: rank %d: %w", p.rank, err)
		}
		p.fail(err)
		return false
	}
}
