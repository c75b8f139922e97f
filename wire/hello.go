package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"
)

// Protocol versions this build speaks.
const (
	ProtoMin = 1 // oldest version this build accepts
	ProtoMax = 1 // newest version this build speaks
)

// KindHello is the kind of the first frame on every connection.
const KindHello = "hello"

// Roles a dialer can claim in its hello.
const (
	RoleClient = "client" // application process (lib/session) talking to its daemon
	RoleDaemon = "daemon" // node daemon talking to the master
	RoleTool   = "tool"   // dynrun / dynrc / dynpset / dyntop talking to the master
	RoleMaster = "master" // master talking to a daemon it started
)

// Roles lists the known roles.
func Roles() []string { return []string{RoleClient, RoleDaemon, RoleTool, RoleMaster} }

// DefaultHelloTimeout bounds the handshake when Options.HelloTimeout is 0.
const DefaultHelloTimeout = 5 * time.Second

// helloMaxFrame limits frames before the peer is authenticated: nobody gets
// to make us allocate 16 MiB before proving who they are. A hello is a few
// short strings; its name is bounded by it too.
const helloMaxFrame = 4 << 10

// readBufSize is the read buffer of an established connection;
// helloBufSize the smaller one used until the peer is authenticated, so
// that pending handshakes cost little (Server.MaxHandshakes of them).
const (
	readBufSize  = 32 << 10
	helloBufSize = 4 << 10
)

// Hello is the body of the dialer's first frame (kind "hello", id 1).
type Hello struct {
	Min   uint32 `msgpack:"min"`             // lowest protocol version the dialer speaks
	Max   uint32 `msgpack:"max"`             // highest protocol version the dialer speaks
	Role  string `msgpack:"role"`            // client, daemon, tool or master
	Name  string `msgpack:"name,omitempty"`  // client: "<job>/<rank>", checked against the caller's pid; others: free-form (node name, tool name)
	Token string `msgpack:"token,omitempty"` // DVM secret; required over TCP
	PID   int    `msgpack:"pid,omitempty"`   // dialer's process id
}

// HelloReply is the body of the acceptor's answer to a hello.
type HelloReply struct {
	V       uint32 `msgpack:"v"`              // chosen protocol version
	Name    string `msgpack:"name,omitempty"` // acceptor's name
	PeerUID int    `msgpack:"peer_uid"`       // the dialer's uid as the acceptor saw it, -1 if unknown
	Role    string `msgpack:"role,omitempty"` // acceptor's role
	PID     int    `msgpack:"pid,omitempty"`  // acceptor's process id
}

// AcceptPolicy decides who may connect, and what the acceptor says about
// itself.
type AcceptPolicy struct {
	Name string // sent to the dialer
	Role string // sent to the dialer
	// Token, when not empty, admits any dialer that presents it, over any
	// transport. It is compared in constant time.
	Token string
	// AllowUIDs lists the uids admitted on unix sockets without a token
	// (checked with SO_PEERCRED). nil means the current process's uid.
	AllowUIDs []int
	// NoUIDAuth requires the token even on unix sockets.
	NoUIDAuth bool
	// Open admits everyone without credentials: only for in-process pipes
	// and tests.
	Open bool
	// Roles lists the roles admitted; empty admits every known role.
	Roles []string
	// Min and Max bound the versions offered (0 means ProtoMin/ProtoMax).
	Min, Max uint32
	// Check, when set, gets the last word on an otherwise admitted dialer.
	// Its error is sent to the dialer (use a coded error, e.g. ErrPermission).
	Check func(h *Hello, peer PeerInfo) error
}

func (p *AcceptPolicy) versions() (uint32, uint32) {
	lo, hi := p.Min, p.Max
	if lo == 0 {
		lo = ProtoMin
	}
	if hi == 0 {
		hi = ProtoMax
	}
	return lo, hi
}

// negotiate picks the highest version both sides speak.
func negotiate(h *Hello, lo, hi uint32) (uint32, error) {
	v := min(h.Max, hi)
	if h.Min > h.Max || v < max(h.Min, lo) {
		return 0, Errorf(ErrVersion, "wire: no common protocol version: dialer speaks %d..%d, acceptor speaks %d..%d", h.Min, h.Max, lo, hi)
	}
	return v, nil
}

func tokenEqual(a, b string) bool {
	// Hashing first makes the comparison constant-time in the lengths too.
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// admit checks credentials and returns how the peer got in.
func (p *AcceptPolicy) admit(h *Hello, cred peerCred) (string, error) {
	if p.Open {
		return "open", nil
	}
	if cred.ok && !p.NoUIDAuth {
		allowed := p.AllowUIDs
		if allowed == nil {
			allowed = []int{os.Getuid()}
		}
		if slices.Contains(allowed, cred.uid) {
			return "uid", nil
		}
	}
	if p.Token != "" && tokenEqual(h.Token, p.Token) {
		return "token", nil
	}
	switch {
	case h.Token != "":
		return "", Errorf(ErrUnauthorized, "wire: hello rejected: wrong token")
	case cred.ok && !p.NoUIDAuth:
		return "", Errorf(ErrUnauthorized, "wire: hello rejected: uid %d is not allowed and no token was given", cred.uid)
	}
	return "", Errorf(ErrUnauthorized, "wire: hello rejected: a token is required")
}

// hsTimer bounds a handshake by the hello timeout and ctx.
type hsTimer struct {
	ctx     context.Context
	nc      net.Conn
	what    string // "handshake with <addr>", for messages
	timeout time.Duration
	byCtx   bool // ctx's deadline comes before the timeout
	stop    func() bool
}

// armHandshake sets nc's deadline to the earlier of the timeout and ctx's
// deadline, and makes a cancel of ctx interrupt blocked I/O at once.
func armHandshake(ctx context.Context, nc net.Conn, timeout time.Duration, what string) *hsTimer {
	if timeout <= 0 {
		timeout = DefaultHelloTimeout
	}
	h := &hsTimer{ctx: ctx, nc: nc, what: what, timeout: timeout}
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && !d.After(dl) {
		dl, h.byCtx = d, true
	}
	_ = nc.SetDeadline(dl)
	h.stop = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	return h
}

// disarm clears the deadline; it fails only when ctx ended meanwhile.
func (h *hsTimer) disarm() error {
	if !h.stop() && h.ctx.Err() != nil {
		return h.fail(h.ctx.Err())
	}
	// An error here means the connection is already dead (a pipe refuses
	// deadlines once the far end closed); the next read or write reports
	// that, after any reply already received has been looked at.
	_ = h.nc.SetDeadline(time.Time{})
	return nil
}

// fail turns a read or write failure during the handshake into a coded
// error.
func (h *hsTimer) fail(err error) error {
	what := ": " + h.what
	ctxErr := h.ctx.Err()
	timedOut := errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
	switch {
	case ctxErr != nil && !errors.Is(ctxErr, context.DeadlineExceeded):
		return Errorf(ErrCanceled, "wire%s: %w", what, ctxErr)
	case timedOut && (h.byCtx || ctxErr != nil):
		// The connection's deadline may fire a moment before ctx's own
		// timer: report it as the context's deadline either way.
		return Errorf(ErrTimeout, "wire%s: %w", what, context.DeadlineExceeded)
	case timedOut:
		return Errorf(ErrTimeout, "wire%s: nothing within %v", what, h.timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(ErrClosed, "wire%s: peer closed the connection", what)
	}
	return Errorf(ErrClosed, "wire%s: %w", what, err)
}

func writeEnvelope(nc net.Conn, e *Envelope) error {
	b := AppendEnvelope(make([]byte, HeaderSize, 128), e)
	putFrameHeader(b)
	_, err := nc.Write(b)
	return err
}

func putFrameHeader(b []byte) {
	n := len(b) - HeaderSize
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

// Dial connects to addr ("unix" or "tcp") and performs the handshake as the
// dialing side. h.Min/h.Max default to ProtoMin/ProtoMax and h.PID to the
// current pid.
func Dial(ctx context.Context, network, addr string, h Hello, opts Options) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError("dial "+addr, ctx.Err())
		}
		return nil, Errorf(ErrClosed, "wire: dial %s %s: %w", network, addr, err)
	}
	return Client(ctx, nc, h, opts)
}

// Client performs the handshake as the dialing side over an existing
// connection and returns the Conn. On failure nc is closed.
func Client(ctx context.Context, nc net.Conn, h Hello, opts Options) (*Conn, error) {
	c, err := clientHandshake(ctx, nc, h, opts)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

func clientHandshake(ctx context.Context, nc net.Conn, h Hello, opts Options) (*Conn, error) {
	if h.Min == 0 && h.Max == 0 {
		h.Min, h.Max = ProtoMin, ProtoMax
	}
	if h.PID == 0 {
		h.PID = os.Getpid()
	}
	what := "handshake with " + nc.RemoteAddr().String()
	hs := armHandshake(ctx, nc, opts.HelloTimeout, what)
	fail := func(err error) (*Conn, error) {
		_ = hs.disarm()
		return nil, hs.fail(err)
	}
	body, err := Marshal(&h)
	if err != nil {
		_ = hs.disarm()
		return nil, err
	}
	if n := len(AppendEnvelope(nil, &Envelope{V: h.Max, ID: 1, Kind: KindHello, Body: body})); n > helloMaxFrame {
		_ = hs.disarm()
		return nil, Errorf(ErrTooLarge, "wire: %s: hello of %d bytes exceeds the %d bytes allowed before authentication (a shorter name?)", what, n, helloMaxFrame)
	}
	if err := writeEnvelope(nc, &Envelope{V: h.Max, ID: 1, Kind: KindHello, Body: body}); err != nil {
		return fail(err)
	}
	fr := NewReader(bufio.NewReaderSize(nc, readBufSize), helloMaxFrame)
	frame, err := fr.ReadFrame()
	if err != nil {
		return fail(err)
	}
	if err := hs.disarm(); err != nil {
		return nil, err
	}
	env, err := DecodeEnvelope(frame)
	if err != nil {
		return nil, fmt.Errorf("wire: %s: %w", what, err)
	}
	if env.Err != nil {
		return nil, fmt.Errorf("wire: %s: %w", what, env.Err)
	}
	if env.Kind != KindHello || env.ID != 1 {
		return nil, Errorf(ErrMalformed, "wire: %s: expected a hello reply, got kind %q id %d", what, env.Kind, env.ID)
	}
	var rep HelloReply
	if err := Unmarshal(env.Body, &rep); err != nil {
		return nil, fmt.Errorf("wire: %s: %w", what, err)
	}
	if rep.V < h.Min || rep.V > h.Max {
		return nil, Errorf(ErrVersion, "wire: %s: acceptor chose version %d outside %d..%d", what, rep.V, h.Min, h.Max)
	}
	peer := PeerInfo{Role: rep.Role, Name: rep.Name, UID: -1, PID: rep.PID, Version: rep.V, Addr: nc.RemoteAddr().String()}
	if cred := peerCredOf(nc); cred.ok {
		peer.UID, peer.PID = cred.uid, cred.pid
	}
	return newConn(nc, fr, peer, true, 1, opts), nil
}

// Accept performs the handshake as the accepting side: it reads the hello,
// negotiates the version, checks credentials against pol and answers. On
// failure the dialer gets an error reply when possible and nc is closed.
func Accept(ctx context.Context, nc net.Conn, pol AcceptPolicy, opts Options) (*Conn, error) {
	c, err := serverHandshake(ctx, nc, &pol, opts)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

func serverHandshake(ctx context.Context, nc net.Conn, pol *AcceptPolicy, opts Options) (*Conn, error) {
	what := "handshake from " + nc.RemoteAddr().String()
	hs := armHandshake(ctx, nc, opts.HelloTimeout, what)
	br := bufio.NewReaderSize(nc, helloBufSize)
	fr := NewReader(br, helloMaxFrame)
	// reject answers the dialer (still under the handshake deadline).
	reject := func(id uint64, err error) (*Conn, error) {
		if id != 0 {
			_ = writeEnvelope(nc, &Envelope{V: ProtoMin, ID: id, Kind: KindHello, Err: ToWire(err)})
		}
		_ = hs.disarm()
		return nil, fmt.Errorf("wire: %s: %w", what, err)
	}
	// An oversize hello is answered as soon as its length is known, not
	// after its body has been read: a dialer whose frame announces more
	// than it sends (a wrong length) would otherwise wait for the deadline
	// and see the connection close with no reason given.
	if hdr, err := br.Peek(HeaderSize); err == nil {
		if n := binary.BigEndian.Uint32(hdr); n > helloMaxFrame {
			// The id is read from what has already arrived, if anything.
			head, _ := br.Peek(min(br.Buffered(), HeaderSize+headKeep))
			env, _ := DecodeEnvelope(head[HeaderSize:])
			return reject(max(env.ID, 1), Errorf(ErrTooLarge, "wire: hello of %d bytes exceeds the %d bytes allowed before authentication", n, helloMaxFrame))
		}
	}
	frame, err := fr.ReadFrame()
	if err != nil {
		_ = hs.disarm()
		return nil, hs.fail(err)
	}
	env, err := DecodeEnvelope(frame)
	if err != nil {
		return reject(env.ID, err)
	}
	if env.Kind != KindHello {
		return reject(env.ID, Errorf(ErrMalformed, "wire: expected a hello first, got kind %q", env.Kind))
	}
	if env.ID == 0 || env.ID%2 == 0 {
		return reject(1, Errorf(ErrMalformed, "wire: hello must carry an odd id, got %d", env.ID))
	}
	var h Hello
	if err := Unmarshal(env.Body, &h); err != nil {
		return reject(env.ID, err)
	}
	lo, hi := pol.versions()
	v, err := negotiate(&h, lo, hi)
	if err != nil {
		return reject(env.ID, err)
	}
	if !slices.Contains(Roles(), h.Role) {
		return reject(env.ID, Errorf(ErrInvalid, "wire: unknown role %q (want one of %v)", h.Role, Roles()))
	}
	if len(pol.Roles) > 0 && !slices.Contains(pol.Roles, h.Role) {
		return reject(env.ID, Errorf(ErrPermission, "wire: role %q may not connect here", h.Role))
	}
	cred := peerCredOf(nc)
	auth, err := pol.admit(&h, cred)
	if err != nil {
		return reject(env.ID, err)
	}
	peer := PeerInfo{Role: h.Role, Name: h.Name, UID: -1, PID: h.PID, Version: v, Auth: auth, Addr: nc.RemoteAddr().String()}
	if cred.ok {
		peer.UID, peer.PID = cred.uid, cred.pid
	}
	if pol.Check != nil {
		if err := pol.Check(&h, peer); err != nil {
			return reject(env.ID, err)
		}
	}
	body, err := Marshal(&HelloReply{V: v, Name: pol.Name, PeerUID: peer.UID, Role: pol.Role, PID: os.Getpid()})
	if err != nil {
		return reject(env.ID, err)
	}
	if err := writeEnvelope(nc, &Envelope{V: v, ID: env.ID, Kind: KindHello, Body: body}); err != nil {
		_ = hs.disarm()
		return nil, hs.fail(err)
	}
	if err := hs.disarm(); err != nil {
		return nil, err
	}
	// The dialer's later ids are odd and above its hello id; this side
	// starts its even ids at 2. Authenticated, the peer gets the full read
	// buffer; bytes it already sent stay in front.
	var src io.Reader = nc
	if n := br.Buffered(); n > 0 {
		early, _ := br.Peek(n)
		src = io.MultiReader(bytes.NewReader(bytes.Clone(early)), nc)
	}
	return newConn(nc, NewReader(bufio.NewReaderSize(src, readBufSize), helloMaxFrame), peer, false, 0, opts), nil
}
