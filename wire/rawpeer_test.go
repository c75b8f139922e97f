package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// rawPeer speaks the protocol by hand, the way a client in another language
// would: generic msgpack maps, no Conn.
type rawPeer struct {
	t  *testing.T
	nc net.Conn
	fr *Reader
}

func (p *rawPeer) send(m map[string]any) {
	p.t.Helper()
	b, err := msgpack.Marshal(m)
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendRaw(b)
}

func (p *rawPeer) sendRaw(body []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(AppendFrame(nil, body)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *rawPeer) recv() map[string]any {
	p.t.Helper()
	_ = p.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := p.fr.ReadFrame()
	if err != nil {
		p.t.Fatalf("raw peer read: %v", err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(f, &m); err != nil {
		p.t.Fatal(err)
	}
	return m
}

func asU64(v any) uint64 {
	switch x := v.(type) {
	case int8:
		return uint64(x)
	case int16:
		return uint64(x)
	case int32:
		return uint64(x)
	case int64:
		return uint64(x)
	case uint8:
		return uint64(x)
	case uint16:
		return uint64(x)
	case uint32:
		return uint64(x)
	case uint64:
		return x
	}
	return 1<<64 - 1
}

// newRawPeer dials a Conn served by srvOpts and does the hello by hand.
func newRawPeer(t *testing.T, srvOpts Options) (*rawPeer, *Conn) {
	t.Helper()
	cn, sn := net.Pipe()
	srvCh := make(chan *Conn, 1)
	go func() {
		c, err := Accept(context.Background(), sn, AcceptPolicy{Token: "tok"}, srvOpts)
		if err != nil {
			t.Error(err)
		}
		srvCh <- c
	}()
	p := &rawPeer{t: t, nc: cn, fr: NewReader(bufio.NewReader(cn), 0)}
	t.Cleanup(func() { _ = cn.Close() })
	p.send(map[string]any{"v": 1, "id": 1, "kind": "hello",
		"body": map[string]any{"min": 1, "max": 1, "role": "tool", "token": "tok", "name": "raw"}})
	rep := p.recv()
	body, _ := rep["body"].(map[string]any)
	if rep["err"] != nil || asU64(body["v"]) != 1 || asU64(rep["id"]) != 1 {
		t.Fatalf("hello reply %v", rep)
	}
	srv := <-srvCh
	if srv == nil {
		t.FailNow()
	}
	closeAndWait(t, srv)
	return p, srv
}

func errCode(m map[string]any) string {
	e, _ := m["err"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestBadFramesGetErrorReplies(t *testing.T) {
	leakCheck(t)
	p, srv := newRawPeer(t, Options{Handler: echoMux().Serve, MaxFrame: 1024})

	good := ordered(t, "v", 1, "id", 3, "kind", "ping", "body", map[string]any{"seq": 5})
	tests := []struct {
		name  string
		frame []byte
		id    uint64
		code  Code
	}{
		{"truncated body", good[:len(good)-1], 3, CodeMalformed},
		{"wrong version", ordered(t, "v", 9, "id", 5, "kind", "ping"), 5, CodeVersion},
		{"unknown kind", ordered(t, "v", 1, "id", 7, "kind", "nope"), 7, CodeUnknownKind},
		{"undecodable body", ordered(t, "v", 1, "id", 9, "kind", "ping", "body", map[string]any{"seq": "x"}), 9, CodeMalformed},
		{"oversize", ordered(t, "v", 1, "id", 11, "kind", "ping", "body", map[string]any{"pad": make([]byte, 5000)}), 11, CodeTooLarge},
		{"deep nesting", ordered(t, "v", 1, "id", 13, "kind", "ping", "body", nest(100)), 13, CodeMalformed},
	}
	for _, tc := range tests {
		p.sendRaw(tc.frame)
		rep := p.recv()
		if asU64(rep["id"]) != tc.id || errCode(rep) != string(tc.code) {
			t.Errorf("%s: reply %v, want id %d code %s", tc.name, rep, tc.id, tc.code)
		}
	}
	// Frames whose id cannot be read get an error frame with id 0, code
	// malformed (too_large for an oversize one), so that the sender learns
	// why nothing else came back...
	idless := []struct {
		name  string
		frame []byte
		code  Code
	}{
		{"array, not a map", []byte{0x93, 1, 2, 3}, CodeMalformed},
		{"empty body", nil, CodeMalformed},
		{"id of the wrong type", ordered(t, "v", 1, "id", "three", "kind", "ping"), CodeMalformed},
		{"bad kind before the id", ordered(t, "v", 1, "kind", 7, "id", 15), CodeMalformed},
		{"oversize with the id after the body", ordered(t, "v", 1, "kind", "ping", "body", make([]byte, 5000), "id", 17), CodeTooLarge},
	}
	for _, tc := range idless {
		p.sendRaw(tc.frame)
		rep := p.recv()
		if id, ok := rep["id"]; !ok || asU64(id) != 0 || errCode(rep) != string(tc.code) {
			t.Errorf("%s: reply %v, want id 0 code %s", tc.name, rep, tc.code)
		}
	}
	// ...and the connection still serves.
	p.sendRaw(good)
	rep := p.recv()
	body, _ := rep["body"].(map[string]any)
	if asU64(rep["id"]) != 3 || rep["kind"] != "ping" || asU64(body["seq"]) != 5 || rep["err"] != nil {
		t.Fatalf("good request after bad frames: %v", rep)
	}
	if srv.Err() != nil {
		t.Fatalf("server conn died: %v", srv.Err())
	}

	// An event from the raw peer reaches nobody (no OnEvent) and is harmless.
	p.send(map[string]any{"v": 1, "id": 0, "kind": "tick"})

	// Server-initiated call to the raw peer uses even ids; answer it by hand.
	done := make(chan error, 1)
	go func() {
		var pong Ping
		err := srv.Call(context.Background(), KindPing, &Ping{Seq: 77}, &pong)
		if err == nil && pong.Seq != 78 {
			err = errors.New("wrong reply")
		}
		done <- err
	}()
	req := p.recv()
	if id := asU64(req["id"]); id == 0 || id%2 != 0 {
		t.Fatalf("acceptor's request id %d is not even", id)
	}
	p.send(map[string]any{"v": 1, "id": req["id"], "kind": req["kind"], "body": map[string]any{"seq": 78}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func nest(n int) any {
	var v any = 1
	for i := 0; i < n; i++ {
		v = []any{v}
	}
	return v
}

// ordered encodes a map with its keys in the given order (Go maps have
// none). Error replies can only be addressed when id precedes a bad body,
// which is why senders write v, id and kind first.
func ordered(t *testing.T, kv ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for _, x := range kv {
		if err := enc.Encode(x); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// A frame cut short by the peer closing breaks the framing: the Conn
// closes and says so.
func TestTruncatedFrameClosesConn(t *testing.T) {
	leakCheck(t)
	p, srv := newRawPeer(t, Options{Handler: echoMux().Serve})
	hdr := binary.BigEndian.AppendUint32(nil, 100)
	if _, err := p.nc.Write(append(hdr, 0x80, 0x81)); err != nil {
		t.Fatal(err)
	}
	_ = p.nc.Close()
	select {
	case <-srv.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("conn did not close on a truncated frame")
	}
	if !errors.Is(srv.Err(), ErrClosed) {
		t.Fatalf("Err = %v", srv.Err())
	}
	if err := srv.Call(context.Background(), KindPing, nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call on dead conn = %v", err)
	}
}

// A reply whose id matches no call (late, or made up) is dropped; a reply
// with a mismatched kind fails the call.
func TestStrayAndMismatchedReplies(t *testing.T) {
	leakCheck(t)
	p, srv := newRawPeer(t, Options{})
	p.send(map[string]any{"v": 1, "id": 1000, "kind": "ping"}) // even: a "reply" to nothing
	done := make(chan error, 1)
	go func() { done <- srv.Call(context.Background(), "a", nil, nil) }()
	req := p.recv()
	p.send(map[string]any{"v": 1, "id": req["id"], "kind": "b"})
	if err := <-done; !errors.Is(err, ErrMalformed) {
		t.Fatalf("mismatched reply kind = %v", err)
	}
	if srv.Err() != nil {
		t.Fatal(srv.Err())
	}
}

// The error notices for frames without a readable id are bounded by a
// token bucket: a burst, then one per noticeEvery.
func TestNoticeRateLimit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name  string
		at    []time.Duration // when each bad frame arrives, after t0
		grant int             // notices sent
	}{
		{"a burst is answered", repeatAt(0, noticeBurst), noticeBurst},
		{"beyond the burst is dropped", repeatAt(0, 3*noticeBurst), noticeBurst},
		{"one more per interval", append(repeatAt(0, noticeBurst+5), repeatAt(2*noticeEvery, 5)...), noticeBurst + 2},
		{"refills up to the burst", append(repeatAt(0, noticeBurst), repeatAt(time.Hour, 2*noticeBurst)...), 2 * noticeBurst},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{}
			got := 0
			for _, d := range tc.at {
				if c.noticeAllowed(t0.Add(d)) {
					got++
				}
			}
			if got != tc.grant {
				t.Fatalf("%d notices granted, want %d", got, tc.grant)
			}
		})
	}
}

func repeatAt(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}
