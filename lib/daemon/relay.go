package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/wire"
)

// The daemon's part in the master's tree (wire.NodeRelay): apply the
// inner request as if the master had sent it, pass the relay on to the
// heads of the parts of the subtree below, and report which nodes did not
// apply it. Other daemons reach this one at its relay address: its client
// socket on the master's host (a daemon connecting with the DVM token),
// or a TCP port when it reached the master over TCP.

// defaultRelayWait bounds the wait for a subtree when the relay gives none.
const defaultRelayWait = 10 * time.Second

type relayState struct {
	id   uint64 // NodeRegister.RelayID: set before registration, then read only
	addr string // NodeRegister.Relay: likewise

	// apply serialises the local application of relays; seen is the
	// highest relay number applied (the master resends a relay that may
	// not have arrived; numbers only grow at any one daemon).
	apply sync.Mutex
	seen  uint64
	// started remembers what the last launches relayed here started, by
	// relay number: a resend of one that was applied (its answer was lost
	// on the way up) must still tell the master what runs.
	started map[uint64][]wire.ProcStarted

	mu     sync.Mutex
	peers  map[string]*peerConn // by relay address
	closed bool
}

type peerConn struct {
	mu sync.Mutex // held while dialing
	c  *wire.Conn
}

// handleRelay serves a relay from the master or from the daemon above.
func (d *Daemon) handleRelay(ctx context.Context, req *wire.Request, b *wire.NodeRelay) (any, error) {
	if b.To != 0 && b.To != d.relay.id {
		// Meant for the daemon this one replaced: the master has sent this
		// one everything since it registered.
		return &wire.NodeRelayReply{Failed: []wire.RelayFailure{{Node: d.node, Unreached: true,
			Err: &wire.Error{Code: wire.CodeClosed, Msg: "daemon " + d.node + ": relay for an earlier daemon of this node"}}}}, nil
	}
	if !wire.Relayable(b.Kind) {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: node.relay: %q cannot be relayed (only node.jobdata, pset.push, rc.push, kv.fenced, ping, node.launch and event)", d.node, b.Kind)
	}
	if b.Job != "" {
		d.setUpLink(b, req.Conn) // before the daemons below can send their fence entries here
	}
	wait := time.Duration(b.WaitMS) * time.Millisecond
	if wait <= 0 {
		wait = defaultRelayWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	parts := wire.RelayParts(len(b.Below), int(b.Radix))
	results := make(chan wire.NodeRelayReply, len(parts))
	for _, p := range parts {
		head, below := b.Below[p[0]], b.Below[p[0]+1:p[1]]
		sub := &wire.NodeRelay{Seq: b.Seq, To: head.ID, Kind: b.Kind, Body: b.Body, Radix: b.Radix, Below: below, Prev: head.Prev,
			WaitMS: (wait * 3 / 4).Milliseconds(), // so that this level still answers when one below it is late
			Job:    b.Job, From: d.relay.addr}
		go func() { results <- d.forward(ctx, head, sub) }()
	}
	var rep wire.NodeRelayReply
	var started []wire.ProcStarted
	var err error
	if b.Kind == wire.KindEvent {
		err = d.deliverEvent(b.Prev, b.Body) // not a request: handed to the clients in the master's order (evorder.go)
	} else {
		started, err = d.applyRelay(ctx, b)
	}
	if err != nil {
		rep.Failed = append(rep.Failed, wire.RelayFailure{Node: d.node, Err: wire.ToWire(err)})
	}
	rep.Started = started
	for range parts {
		sub := <-results
		rep.Failed = append(rep.Failed, sub.Failed...)
		rep.Started = append(rep.Started, sub.Started...)
	}
	return &rep, nil
}

// keepLaunches bounds relayState.started.
const keepLaunches = 16

// applyRelay applies the inner request of b once and returns, for a
// launch, the processes it started. A launch holds apply until its forks
// are done, so that a resend waits for them and answers the same.
func (d *Daemon) applyRelay(ctx context.Context, b *wire.NodeRelay) ([]wire.ProcStarted, error) {
	d.relay.apply.Lock()
	defer d.relay.apply.Unlock()
	if b.Seq != 0 && b.Seq <= d.relay.seen {
		// Applied already: this is the master's resend, or the late copy.
		return d.relay.started[b.Seq], nil
	}
	d.relay.seen = max(d.relay.seen, b.Seq)
	rep, err := d.fromMaster.Serve(ctx, &wire.Request{Kind: b.Kind, Body: []byte(b.Body), Conn: d.master})
	if later, ok := rep.(wire.Later); ok && err == nil {
		rep, err = later()
	}
	lr, ok := rep.(*wire.LaunchReply)
	if !ok || err != nil || b.Seq == 0 {
		return nil, err
	}
	if d.relay.started == nil {
		d.relay.started = make(map[uint64][]wire.ProcStarted)
	}
	if len(d.relay.started) >= keepLaunches {
		delete(d.relay.started, slices.Min(slices.Collect(maps.Keys(d.relay.started))))
	}
	d.relay.started[b.Seq] = lr.Started
	return lr.Started, nil
}

// forward passes sub to head and returns the answer of head's subtree:
// all of it failed, as not reached, when head cannot be asked.
func (d *Daemon) forward(ctx context.Context, head wire.RelayHop, sub *wire.NodeRelay) wire.NodeRelayReply {
	var rep wire.NodeRelayReply
	c, err := d.peer(ctx, head.Addr)
	if err == nil {
		err = c.Call(ctx, wire.KindNodeRelay, sub, &rep)
	}
	if err == nil {
		return rep
	}
	d.log.Debug("daemon: relay to a daemon below failed; the master will send to its subtree directly", "node", head.Node, "addr", head.Addr, "err", err)
	werr := wire.ToWire(err)
	failed := make([]wire.RelayFailure, 0, 1+len(sub.Below))
	failed = append(failed, wire.RelayFailure{Node: head.Node, Unreached: true, Err: werr})
	for _, h := range sub.Below {
		failed = append(failed, wire.RelayFailure{Node: h.Node, Unreached: true, Err: werr})
	}
	return wire.NodeRelayReply{Failed: failed}
}

// peer returns a connection to the daemon at addr, dialing it the first
// time (and again after it closed).
func (d *Daemon) peer(ctx context.Context, addr string) (*wire.Conn, error) {
	d.relay.mu.Lock()
	if d.relay.closed {
		d.relay.mu.Unlock()
		return nil, wire.Errorf(wire.ErrClosed, "daemon %s: shutting down", d.node)
	}
	if d.relay.peers == nil {
		d.relay.peers = make(map[string]*peerConn)
	}
	p := d.relay.peers[addr]
	if p == nil {
		p = &peerConn{}
		d.relay.peers[addr] = p
	}
	d.relay.mu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil && p.c.Err() == nil {
		return p.c, nil
	}
	network, address, ok := strings.Cut(addr, ":")
	if !ok || (network != "unix" && network != "tcp") || address == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: bad relay address %q (want unix:<path> or tcp:<host:port>)", d.node, addr)
	}
	c, err := wire.Dial(ctx, network, address, wire.Hello{Role: wire.RoleDaemon, Name: d.node, Token: d.cfg.Token}, wire.Options{Logger: d.log})
	if err != nil {
		return nil, err
	}
	d.relay.mu.Lock()
	closed := d.relay.closed
	d.relay.mu.Unlock()
	if closed {
		c.Close()
		return nil, wire.Errorf(wire.ErrClosed, "daemon %s: shutting down", d.node)
	}
	p.c = c
	return c, nil
}

// closePeers closes the connections to other daemons (at shutdown).
func (d *Daemon) closePeers() {
	d.relay.mu.Lock()
	d.relay.closed = true
	peers := d.relay.peers
	d.relay.peers = nil
	d.relay.mu.Unlock()
	for _, p := range peers {
		p.mu.Lock()
		if p.c != nil {
			p.c.Close()
		}
		p.mu.Unlock()
	}
}

// checkPeer admits a daemon of the DVM to the client socket (or the relay
// port): it must present the DVM token, whatever its transport.
func (d *Daemon) checkPeer(h *wire.Hello) error {
	if d.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(h.Token), []byte(d.cfg.Token)) != 1 {
		return wire.Errorf(wire.ErrPermission, "daemon %s: a daemon must present the DVM token to relay", d.node)
	}
	return nil
}

// handlePeerRelay serves node.relay on the client socket: from another
// daemon only.
func (d *Daemon) handlePeerRelay(ctx context.Context, req *wire.Request, b *wire.NodeRelay) (any, error) {
	if req.Conn == nil || req.Conn.Peer().Role != wire.RoleDaemon {
		return nil, wire.Errorf(wire.ErrPermission, "daemon %s: node.relay comes from the master or another daemon, not from a process", d.node)
	}
	return d.handleRelay(ctx, req, b)
}

// relayLink gives the socket at sock a second name in the DVM's socket
// directory, for relays.
func relayLink(dir, dvm, sock string) (string, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	p, err := dvmdir.SocketPath(dir, dvm, ".r"+hex.EncodeToString(rnd[:]))
	if err != nil {
		return "", err
	}
	return p, os.Link(sock, p)
}

// relayListener opens the TCP port other daemons relay to when this one
// reached the master over TCP (other hosts cannot reach its unix
// socket), on the address its connection to the master came from.
func relayListener(mc *wire.Conn) (net.Listener, error) {
	host := ""
	if a, ok := mc.LocalAddr().(*net.TCPAddr); ok {
		host = a.IP.String()
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}
