package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Handler serves one request from the peer. It runs in its own goroutine;
// ctx is canceled when the connection closes. The reply (nil for an empty
// body) is encoded with the package settings; a returned error is sent to
// the peer as {code, msg} (see ToWire) and rebuilt there as an error that
// matches the sentinel of its code.
type Handler func(ctx context.Context, req *Request) (reply any, err error)

// Request is an incoming request, or an incoming event (then ID is 0).
type Request struct {
	ID   uint64             // 0 for events
	Kind string             // message kind
	Body msgpack.RawMessage // undecoded payload; may be empty; owned by the receiver
	Conn *Conn              // the connection it arrived on
}

// Decode decodes the body into v. An empty body leaves v untouched. Errors
// match ErrMalformed and name the kind, so a handler can return them as is.
func (r *Request) Decode(v any) error {
	if len(r.Body) == 0 {
		return nil
	}
	if err := unmarshal(r.Body, v); err != nil {
		return Errorf(ErrMalformed, "wire: %s: bad body: %w", r.Kind, err)
	}
	return nil
}

// Options configure a Conn. The zero value is usable: no handler (every
// request is answered with ErrUnknownKind), events dropped, 16 MiB frames.
type Options struct {
	// MaxFrame limits the body of a frame read from the peer (and of frames
	// this side writes). <= 0 means DefaultMaxFrame.
	MaxFrame int
	// Handler serves requests from the peer; see Mux.
	Handler Handler
	// Inline, when set, names the request kinds whose handler runs on the
	// reader goroutine instead of a goroutine of its own: for short
	// handlers that never block (no Call, no long lock), it saves a
	// goroutine and, on a loaded machine, the wake-up of another thread.
	// Requests of such kinds are also served in arrival order. Replies to
	// this side's own calls wait behind them.
	Inline func(kind string) bool
	// OnEvent receives pushed events (id 0) in arrival order, on the reader
	// goroutine: it must not block for long (replies to this side's own
	// calls wait behind it) and must not wait on a Call over the same
	// connection. Hand heavy work to another goroutine.
	OnEvent func(ev *Request)
	// OnClose is called once, from the reader goroutine, after the
	// connection has failed or been closed, with the reason (which matches
	// ErrClosed).
	OnClose func(c *Conn, err error)
	// Logger receives protocol problems (malformed frames, dropped late
	// replies). nil discards.
	Logger *slog.Logger
	// HelloTimeout bounds the handshake. <= 0 means DefaultHelloTimeout.
	HelloTimeout time.Duration
	// WriteTimeout, when > 0, bounds each frame write; a peer that stops
	// reading for longer gets its connection closed. 0 means no bound.
	WriteTimeout time.Duration
	// MaxInflight bounds the peer's requests being served at once (their
	// handlers running or their replies being written); <= 0 means
	// DefaultMaxInflight. MaxInflightBytes bounds the bytes of their
	// bodies; <= 0 means DefaultMaxInflightBytes. A request over either is
	// answered at once with ErrLimit. The answer is written on the reader
	// goroutine, so a peer that sends without reading stops being read:
	// its own writes block instead of this side's memory growing.
	MaxInflight      int
	MaxInflightBytes int
}

// Defaults of the in-flight bounds (docs/limits.md).
const (
	DefaultMaxInflight      = 4096
	DefaultMaxInflightBytes = 64 << 20
)

// PeerInfo describes the far side as learned during the handshake.
type PeerInfo struct {
	Role    string // "client", "daemon", "tool" or "master"
	Name    string // free-form name the peer gave
	UID     int    // peer's uid from SO_PEERCRED on unix sockets, else -1
	PID     int    // peer's pid (from SO_PEERCRED when available, else as claimed)
	Version uint32 // negotiated protocol version
	Auth    string // how the peer was admitted: "uid", "token" or "open" (empty on the dialing side)
	Addr    string // remote address
}

func (p PeerInfo) String() string {
	s := p.Role
	if p.Name != "" {
		s += " " + fmt.Sprintf("%q", p.Name)
	}
	if p.Addr != "" && p.Addr != "@" { // "@": an unnamed unix socket
		s += " at " + p.Addr
	}
	if s == "" {
		return "peer"
	}
	return s
}

// Conn is an established connection speaking the protocol. Any number of
// goroutines may Call and Notify concurrently: frames are written whole
// under a lock, and replies are matched to calls by id on a single reader
// goroutine.
type Conn struct {
	nc      net.Conn
	fr      *Reader
	opts    Options
	log     *slog.Logger
	peer    PeerInfo
	version uint32
	odd     bool // this side dialed and so owns the odd ids
	max     int

	seq atomic.Uint64 // last id used by this side

	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex
	pending map[uint64]*call
	closed  bool
	err     error

	ctx      context.Context // handler context, canceled on close
	cancel   context.CancelFunc
	handlers sync.WaitGroup
	serving  atomic.Int64  // requests of the peer being served (Quiet, MaxInflight)
	inBytes  atomic.Int64  // bytes of their bodies (MaxInflightBytes)
	freed    chan struct{} // capacity 1: signalled when a served request ends (admit)
	done     chan struct{}

	heard   atomic.Int64 // unix ns the reader last read a frame or got free again (Heard)
	handing atomic.Bool  // the reader is handing a frame over (dispatch)

	notices  int       // reader only: tokens left for id-less error notices (noticeAllowed)
	noticeAt time.Time // reader only: when the bucket was last refilled
}

type call struct {
	kind string
	ch   chan callResult // buffered: whoever removes the call from pending sends once
}

type callResult struct {
	body []byte
	err  error
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newConn starts serving nc, whose handshake is done. lastID is the last id
// this side used during the handshake.
func newConn(nc net.Conn, fr *Reader, peer PeerInfo, dialer bool, lastID uint64, opts Options) *Conn {
	c := &Conn{
		nc:      nc,
		fr:      fr,
		opts:    opts,
		log:     opts.Logger,
		peer:    peer,
		version: peer.Version,
		odd:     dialer,
		max:     normMax(opts.MaxFrame),
		pending: make(map[uint64]*call),
		done:    make(chan struct{}),
		freed:   make(chan struct{}, 1),
	}
	if c.log == nil {
		c.log = discardLogger()
	}
	c.seq.Store(lastID)
	c.heard.Store(time.Now().UnixNano())
	fr.SetMax(c.max)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.readLoop()
	return c
}

// Peer returns what the handshake established about the far side.
func (c *Conn) Peer() PeerInfo { return c.peer }

// LocalAddr and RemoteAddr return the socket addresses.
func (c *Conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Done is closed once the connection is dead: the reader has stopped,
// OnClose has returned and every handler has returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is nil while the connection is open, then the reason it closed (an
// error matching ErrClosed, e.g. `connection to daemon "n1" at ... closed
// by peer`).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection: pending calls fail at once with an error
// matching ErrClosed, handler contexts are canceled. It does not wait for
// the reader goroutine; use Done for that. Closing twice is harmless.
func (c *Conn) Close() error {
	c.shutdown(Errorf(ErrClosed, "connection to %s closed", c.peer))
	return nil
}

// Quiet waits until no request of the peer is being served, so that
// replies already decided get written before a shutdown closes the
// connection, or until ctx ends (handlers that wait for more are not
// waited for past it).
func (c *Conn) Quiet(ctx context.Context) {
	for c.serving.Load() > 0 && ctx.Err() == nil {
		select {
		case <-c.Done():
			return
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
}

func (c *Conn) shutdown(cause error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = cause
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()

	c.cancel()
	_ = c.nc.Close()
	for _, cl := range pending {
		cl.ch <- callResult{err: fmt.Errorf("wire: call %s: %w", cl.kind, cause)}
	}
}

func (c *Conn) closedErr(kind string) error {
	return fmt.Errorf("wire: call %s: %w", kind, c.Err())
}

// ownsID reports whether id is one this side hands out (so a frame carrying
// it is a reply to one of our calls).
func (c *Conn) ownsID(id uint64) bool { return (id%2 == 1) == c.odd }

// Call sends a request and waits for its reply, decoding the reply body
// into resp (which may be nil to ignore it). req may be nil for an empty
// body.
//
// Errors: the peer's error (matching the sentinel of its code, message
// kept); an error matching ErrTimeout or ErrCanceled (and wrapping
// ctx.Err()) when ctx ends first, in which case a late reply is dropped;
// ErrClosed when the connection closes; ErrTooLarge when the request does
// not fit in a frame; ErrMalformed when the reply body does not decode.
func (c *Conn) Call(ctx context.Context, kind string, req, resp any) error {
	if err := ctx.Err(); err != nil {
		return ctxError(kind, err)
	}
	wait, err := c.Start(kind, req)
	if err != nil {
		return err
	}
	return wait(ctx, resp)
}

// Start sends a request and returns once its frame is written, without
// waiting for the reply; wait then waits for it as Call does (errors
// alike). Requests started one after the other reach the peer in that
// order, while their replies are awaited side by side. A reply nobody
// waits for is dropped when it arrives.
func (c *Conn) Start(kind string, req any) (wait func(ctx context.Context, resp any) error, err error) {
	id := c.seq.Add(2)
	cl := &call{kind: kind, ch: make(chan callResult, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.closedErr(kind)
	}
	c.pending[id] = cl
	c.mu.Unlock()

	if err := c.send(id, kind, req, nil); err != nil {
		c.forget(id)
		return nil, err
	}
	return func(ctx context.Context, resp any) error {
		select {
		case r := <-cl.ch:
			if r.err != nil {
				return r.err
			}
			if resp != nil && len(r.body) > 0 {
				if err := unmarshal(r.body, resp); err != nil {
					return Errorf(ErrMalformed, "wire: call %s: bad reply body: %w", kind, err)
				}
			}
			return nil
		case <-ctx.Done():
			c.forget(id) // a reply racing in lands in the buffered channel and is dropped
			return ctxError(kind, ctx.Err())
		}
	}, nil
}

func ctxError(kind string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return Errorf(ErrTimeout, "wire: call %s: %w", kind, err)
	}
	return Errorf(ErrCanceled, "wire: call %s: %w", kind, err)
}

func (c *Conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Notify pushes an event (id 0) to the peer; no reply comes back.
func (c *Conn) Notify(kind string, body any) error {
	if c.Err() != nil {
		return fmt.Errorf("wire: notify %s: %w", kind, c.Err())
	}
	return c.send(0, kind, body, nil)
}

// send encodes one envelope straight into a pooled frame buffer and writes
// it with a single write call.
func (c *Conn) send(id uint64, kind string, body any, werr *Error) error {
	s := getEnc()
	defer putEnc(s)
	// Frame header and a fixmap placeholder: the envelope has 3 to 5 keys,
	// so its map header is always one byte and is patched at the end.
	b := append(s.buf.b[:0], 0, 0, 0, 0, 0x80)
	b = appendEnvelopeHead(b, c.version, id, kind)
	n := 3
	if body != nil {
		if raw, ok := body.(msgpack.RawMessage); ok && len(raw) == 0 {
			body = nil
		}
	}
	if body != nil {
		b = appendStr(b, "body")
		mark := len(b)
		s.buf.b = b
		if err := s.enc.Encode(body); err != nil {
			return Errorf(ErrInvalid, "wire: %s: cannot encode body %T: %w", kind, body, err)
		}
		b = s.buf.b
		if len(b) == mark { // a custom encoder wrote nothing: treat as no body
			b = b[:mark-5]
		} else {
			n++
		}
	}
	if werr != nil {
		b = appendErr(b, werr)
		n++
	}
	s.buf.b = b // keep the grown buffer for the pool
	b[HeaderSize] = 0x80 | byte(n)
	size := len(b) - HeaderSize
	if size > c.max {
		return Errorf(ErrTooLarge, "wire: %s: message of %d bytes exceeds the frame limit of %d bytes", kind, size, c.max)
	}
	binary.BigEndian.PutUint32(b, uint32(size))
	return c.write(kind, b)
}

func (c *Conn) write(kind string, frame []byte) error {
	c.wmu.Lock()
	if c.opts.WriteTimeout > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.WriteTimeout))
	}
	_, err := c.nc.Write(frame)
	c.wmu.Unlock()
	if err == nil {
		return nil
	}
	if cerr := c.Err(); cerr != nil {
		return fmt.Errorf("wire: send %s: %w", kind, cerr)
	}
	// A failed or partial write leaves the stream without framing: the
	// connection cannot be used any more.
	cause := Errorf(ErrClosed, "connection to %s lost on write: %w", c.peer, err)
	c.shutdown(cause)
	return fmt.Errorf("wire: send %s: %w", kind, cause)
}

func (c *Conn) readLoop() {
	for {
		frame, err := c.fr.ReadFrame()
		if err != nil {
			var tl *FrameTooLargeError
			if errors.As(err, &tl) {
				c.onOversize(tl)
				continue
			}
			c.shutdown(c.readError(err))
			break
		}
		c.heard.Store(time.Now().UnixNano())
		c.handing.Store(true)
		c.dispatch(frame)
		c.handing.Store(false)
		// What arrived while this side was busy is still unread: the
		// peer's silence is counted from here.
		c.heard.Store(time.Now().UnixNano())
	}
	if c.opts.OnClose != nil {
		c.opts.OnClose(c, c.Err())
	}
	c.handlers.Wait()
	close(c.done)
}

// Heard returns when the peer was last heard from: when the reader last
// read a frame of any kind (a reply, a request, an event). While the
// reader is handing a frame over (an event callback or an inline handler
// waiting on this side's busy code), frames behind it are unread through
// no fault of the peer, so Heard returns now. Failure detectors use it so
// that a live peer is not blamed for this side being slow.
func (c *Conn) Heard() time.Time {
	if c.handing.Load() {
		return time.Now()
	}
	return time.Unix(0, c.heard.Load())
}

func (c *Conn) readError(err error) error {
	switch {
	case errors.Is(err, io.EOF):
		return Errorf(ErrClosed, "connection to %s closed by peer", c.peer)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(ErrClosed, "connection to %s closed by peer inside a frame", c.peer)
	}
	return Errorf(ErrClosed, "connection to %s lost: %w", c.peer, err)
}

func (c *Conn) dispatch(frame []byte) {
	env, idKnown, err := decodeEnvelope(frame)
	if err == nil && env.V != c.version {
		err = Errorf(ErrVersion, "wire: frame has protocol version %d, the connection uses %d", env.V, c.version)
	}
	if err != nil {
		c.onBadFrame(&env, idKnown, err)
		return
	}
	switch {
	case env.ID == 0 && env.Err != nil:
		// The peer could not read the id of a frame of ours (onBadFrame
		// on its side): a bug of this side or a damaged stream. Nobody
		// waits for it, so it can only be reported.
		c.log.Warn("wire: the peer could not read a frame of ours", "kind", env.Kind, "peer", c.peer.String(), "code", env.Err.Code, "msg", env.Err.Msg)
	case env.ID == 0:
		c.onEvent(&env)
	case c.ownsID(env.ID):
		c.onReply(&env)
	default:
		c.onRequest(&env)
	}
}

func (c *Conn) onEvent(env *Envelope) {
	if c.opts.OnEvent == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("wire: event callback panicked", "kind", env.Kind, "peer", c.peer.String(), "panic", p, "stack", string(debug.Stack()))
		}
	}()
	c.opts.OnEvent(&Request{Kind: env.Kind, Body: env.Body, Conn: c})
}

func (c *Conn) onReply(env *Envelope) {
	c.mu.Lock()
	cl := c.pending[env.ID]
	delete(c.pending, env.ID)
	c.mu.Unlock()
	if cl == nil {
		c.log.Debug("wire: dropped reply to no pending call (late or unknown)", "id", env.ID, "kind", env.Kind, "peer", c.peer.String())
		return
	}
	switch {
	case env.Err != nil:
		cl.ch <- callResult{err: env.Err}
	case env.Kind != "" && env.Kind != cl.kind:
		cl.ch <- callResult{err: Errorf(ErrMalformed, "wire: call %s: reply has kind %q", cl.kind, env.Kind)}
	default:
		cl.ch <- callResult{body: env.Body}
	}
}

func (c *Conn) onRequest(env *Envelope) {
	if c.opts.Handler == nil {
		c.replyErr(env.ID, env.Kind, Errorf(ErrUnknownKind, "wire: %s serves no requests (kind %q)", c.side(), env.Kind))
		return
	}
	if err := c.admit(env); err != nil {
		c.replyErr(env.ID, env.Kind, err)
		return
	}
	c.handlers.Add(1)
	c.serving.Add(1)
	c.inBytes.Add(int64(len(env.Body)))
	req := &Request{ID: env.ID, Kind: env.Kind, Body: env.Body, Conn: c}
	if c.opts.Inline != nil && c.opts.Inline(env.Kind) {
		c.serve(req)
		return
	}
	go c.serve(req)
}

// admitWait is how long a request over an in-flight bound waits for
// served ones to end before it is refused: the peer may have its replies
// already, the counts drop a moment after they are written.
const admitWait = 100 * time.Millisecond

// admit applies the in-flight bounds to a request of the peer. One request
// is always admitted, whatever its size (the frame limit bounds it). It
// runs on the reader goroutine, so while it waits nothing else is read.
func (c *Conn) admit(env *Envelope) error {
	var timeout <-chan time.Time
	for {
		err := c.overBound(env)
		if err == nil {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(admitWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-c.freed:
		case <-timeout:
			return err
		case <-c.ctx.Done():
			return err
		}
	}
}

// overBound says which in-flight bound the request env would break.
func (c *Conn) overBound(env *Envelope) error {
	maxN, maxB := c.opts.MaxInflight, c.opts.MaxInflightBytes
	if maxN <= 0 {
		maxN = DefaultMaxInflight
	}
	if maxB <= 0 {
		maxB = DefaultMaxInflightBytes
	}
	n, b := c.serving.Load(), c.inBytes.Load()
	switch {
	case n >= int64(maxN):
		return Errorf(ErrLimit, "wire: %s: %d requests of this connection are being served, the limit (docs/limits.md): read their replies before sending more", env.Kind, maxN)
	case n > 0 && b+int64(len(env.Body)) > int64(maxB):
		return Errorf(ErrLimit, "wire: %s: the requests being served on this connection hold %d bytes, the limit is %d (docs/limits.md): read their replies before sending more", env.Kind, b, maxB)
	}
	return nil
}

// served ends the service of req: its counts drop and a request waiting
// in admit looks again.
func (c *Conn) served(req *Request) {
	c.inBytes.Add(-int64(len(req.Body)))
	c.serving.Add(-1)
	select {
	case c.freed <- struct{}{}:
	default:
	}
	c.handlers.Done()
}

func (c *Conn) side() string {
	if c.odd {
		return "dialing side"
	}
	return "accepting side"
}

// ReplyThen is a reply whose Then runs once Reply has been written: a
// handler whose work ends the connection (a stop) answers first.
type ReplyThen struct {
	Reply any
	Then  func()
}

// Later is a reply an Inline handler returns when only the start of its
// work must happen in arrival order: the handler does that part on the
// reader goroutine (so later requests see its effect), and Later, run on
// a goroutine of its own, does the slow rest and gives the reply.
type Later func() (any, error)

func (c *Conn) serve(req *Request) {
	reply, err := c.guard(req, func() (any, error) { return c.opts.Handler(c.ctx, req) })
	if later, ok := reply.(Later); ok && err == nil {
		go func() {
			reply, err := c.guard(req, later)
			c.finish(req, reply, err)
		}()
		return
	}
	c.finish(req, reply, err)
}

// finish sends the reply of a request and ends its service.
func (c *Conn) finish(req *Request, reply any, err error) {
	defer c.served(req)
	if err != nil {
		c.replyErr(req.ID, req.Kind, err)
		return
	}
	if rt, ok := reply.(ReplyThen); ok {
		reply = rt.Reply
		if rt.Then != nil {
			defer rt.Then()
		}
	}
	if err := c.send(req.ID, req.Kind, reply, nil); err != nil {
		switch {
		case c.Err() != nil:
			// the connection is gone; nobody to tell
		case errors.Is(err, ErrTooLarge):
			c.replyErr(req.ID, req.Kind, err)
		default:
			c.log.Error("wire: cannot encode reply", "kind", req.Kind, "err", err)
			c.replyErr(req.ID, req.Kind, Errorf(ErrInternal, "wire: %s: cannot encode reply: %v", req.Kind, err))
		}
	}
}

// guard runs f, the handling of req, turning a panic into an error reply.
func (c *Conn) guard(req *Request, f func() (any, error)) (reply any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("wire: handler panicked", "kind", req.Kind, "peer", c.peer.String(), "panic", p, "stack", string(debug.Stack()))
			reply, err = nil, Errorf(ErrInternal, "wire: %s: handler panicked: %v", req.Kind, p)
		}
	}()
	return f()
}

// replyErr sends an error reply; failures are only logged (the peer is gone
// or the connection is closing).
func (c *Conn) replyErr(id uint64, kind string, err error) {
	if sendErr := c.send(id, kind, nil, ToWire(err)); sendErr != nil && c.Err() == nil {
		c.log.Warn("wire: cannot send error reply", "kind", kind, "err", sendErr)
	}
}

// Error notices for frames whose id could not be read are rate limited
// (a token bucket per connection): noticeBurst at once, then one per
// noticeEvery. A peer that sends nothing but garbage gets that many
// answers; the rest of its bad frames are dropped with a log line.
const (
	noticeBurst = 16
	noticeEvery = 100 * time.Millisecond
)

// noticeAllowed takes a token of the notice bucket. Only the reader
// goroutine calls it.
func (c *Conn) noticeAllowed(now time.Time) bool {
	if c.noticeAt.IsZero() {
		c.noticeAt, c.notices = now, noticeBurst
	}
	if add := int(now.Sub(c.noticeAt) / noticeEvery); add > 0 {
		c.notices = min(noticeBurst, c.notices+add)
		c.noticeAt = c.noticeAt.Add(time.Duration(add) * noticeEvery)
	}
	if c.notices == 0 {
		return false
	}
	c.notices--
	return true
}

// onBadFrame answers a frame that could not be used. The id, when one was
// recovered, decides where the error goes: back to the peer for its
// request, to our own pending call for a reply, nowhere for an event
// (id read as 0). A frame whose id could not be read at all gets an error
// frame with id 0 (rate limited), so that the peer learns why its frame
// went unanswered; the connection stays up.
func (c *Conn) onBadFrame(env *Envelope, idKnown bool, err error) {
	switch {
	case !idKnown:
		if !c.noticeAllowed(time.Now()) {
			c.log.Warn("wire: dropped bad frame without an id (notices rate limited)", "kind", env.Kind, "peer", c.peer.String(), "err", err)
			return
		}
		c.replyErr(0, env.Kind, err)
	case env.ID == 0:
		c.log.Warn("wire: dropped bad frame", "kind", env.Kind, "peer", c.peer.String(), "err", err)
	case c.ownsID(env.ID):
		c.mu.Lock()
		cl := c.pending[env.ID]
		delete(c.pending, env.ID)
		c.mu.Unlock()
		if cl != nil {
			cl.ch <- callResult{err: fmt.Errorf("wire: call %s: bad reply: %w", cl.kind, err)}
		}
	default:
		c.replyErr(env.ID, env.Kind, err)
	}
}

func (c *Conn) onOversize(tl *FrameTooLargeError) {
	env, idKnown, _ := decodeEnvelope(tl.Head) // partial: id and kind come first
	err := Errorf(ErrTooLarge, "wire: %s frame of %d bytes exceeds the limit of %d bytes", env.Kind, tl.Size, tl.Limit)
	if env.Kind == "" {
		err = Errorf(ErrTooLarge, "wire: frame of %d bytes exceeds the limit of %d bytes", tl.Size, tl.Limit)
	}
	c.onBadFrame(&env, idKnown, err)
}
