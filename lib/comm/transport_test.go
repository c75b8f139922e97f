package comm

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fakeEndpoint is an endpoint without a session or listeners: enough to
// drive admit with an in-memory connection.
func fakeEndpoint() *Endpoint {
	e := &Endpoint{
		log: slog.New(slog.DiscardHandler), o: Options{Timeout: 5 * time.Second},
		me: 0, job: "j.1", q: newMatcher(), peers: map[uint32]*peer{}, hellos: map[net.Conn]bool{},
	}
	e.addr.token[3] = 9
	return e
}

// TestAdmit: a hello with the wrong token or job is refused (the
// connection closed without an answer); a right one is answered, its
// frames reach the matcher, and its end fails receives from that rank.
func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    hello
		ok   bool
	}{
		{"right", hello{rank: 4, job: "j.1"}, true},
		{"wrong token", hello{rank: 4, job: "j.1"}, false},
		{"other job", hello{rank: 4, job: "j.2"}, false},
		{"own rank", hello{rank: 0, job: "j.1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := fakeEndpoint()
			if tc.name != "wrong token" {
				tc.h.token = e.addr.token
			}
			us, them := net.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				e.admit(us)
			}()
			them.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := them.Write(tc.h.encode()); err != nil {
				t.Fatal(err)
			}
			var ans [1]byte
			_, err := io.ReadFull(them, ans[:])
			if !tc.ok {
				if err == nil {
					t.Errorf("refused hello answered %q", ans[:])
				}
				<-done
				return
			}
			if err != nil || ans[0] != helloOK {
				t.Fatalf("answer %q, %v", ans[:], err)
			}
			pending := newRecv(7, 4, 1)
			e.q.post(pending)
			b := make([]byte, headerLen)
			header{ctx: 7, src: 4, tag: 1, n: 2}.put(b)
			them.Write(append(b, "hi"...))
			<-pending.done
			if string(pending.m.data) != "hi" {
				t.Errorf("got %q", pending.m.data)
			}
			r := newRecv(7, 4, 1)
			e.q.post(r)
			them.Close()
			<-r.done
			if !errors.Is(r.err, wire.ErrClosed) {
				t.Errorf("receive from a closed peer: %v", r.err)
			}
			<-done
		})
	}
}

// TestAdmitForgedSource: a frame that claims another source ends the
// connection.
func TestAdmitForgedSource(t *testing.T) {
	e := fakeEndpoint()
	us, them := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.admit(us)
	}()
	them.SetDeadline(time.Now().Add(5 * time.Second))
	them.Write(hello{token: e.addr.token, rank: 4, job: "j.1"}.encode())
	var ans [1]byte
	io.ReadFull(them, ans[:])
	r := newRecv(7, 4, 1)
	e.q.post(r)
	b := make([]byte, headerLen)
	header{ctx: 7, src: 5, tag: 1}.put(b)
	them.Write(b)
	<-r.done
	if !errors.Is(r.err, wire.ErrMalformed) {
		t.Errorf("receive after a forged frame: %v", r.err)
	}
	<-done
}
