package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestVersionNegotiation(t *testing.T) {
	leakCheck(t)
	tests := []struct {
		name       string
		dMin, dMax uint32
		aMin, aMax uint32
		want       uint32 // 0 = must fail
	}{
		{"equal", 1, 1, 1, 1, 1},
		{"highest common", 1, 3, 1, 2, 2},
		{"acceptor newer", 1, 2, 2, 5, 2},
		{"disjoint, dialer newer", 2, 3, 1, 1, 0},
		{"disjoint, dialer older", 1, 1, 2, 2, 0},
		{"inverted range", 3, 1, 1, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cn, sn := net.Pipe()
			cli, srv, cerr, serr := handshakePair(t, cn, sn,
				Hello{Min: tc.dMin, Max: tc.dMax, Role: RoleTool},
				AcceptPolicy{Open: true, Min: tc.aMin, Max: tc.aMax}, Options{Handler: echoMux().Serve}, Options{Handler: echoMux().Serve})
			if tc.want == 0 {
				if !errors.Is(cerr, ErrVersion) || !errors.Is(serr, ErrVersion) {
					t.Fatalf("errors %v / %v, want ErrVersion on both sides", cerr, serr)
				}
				for _, s := range []string{rangeStr(tc.dMin, tc.dMax), rangeStr(tc.aMin, tc.aMax)} {
					if !strings.Contains(cerr.Error(), s) {
						t.Errorf("dialer's error %q does not name range %s", cerr, s)
					}
				}
				return
			}
			if cerr != nil || serr != nil {
				t.Fatalf("handshake: %v / %v", cerr, serr)
			}
			if cli.Peer().Version != tc.want || srv.Peer().Version != tc.want {
				t.Fatalf("versions %d / %d, want %d", cli.Peer().Version, srv.Peer().Version, tc.want)
			}
			// frames carry the negotiated version both ways (a mismatch
			// would be answered with ErrVersion)
			var p Ping
			if err := cli.Call(context.Background(), KindPing, &Ping{Seq: 1}, &p); err != nil || p.Seq != 1 {
				t.Fatalf("dialer's call: %v", err)
			}
			if err := srv.Call(context.Background(), KindPing, &Ping{Seq: 2}, &p); err != nil || p.Seq != 2 {
				t.Fatalf("acceptor's call: %v", err)
			}
		})
	}
}

func rangeStr(lo, hi uint32) string { return fmt.Sprintf("%d..%d", lo, hi) }

func TestTokenOverTCP(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pol := AcceptPolicy{Token: "right", Name: "master", Role: RoleMaster}
	tests := []struct {
		token string
		ok    bool
	}{{"right", true}, {"wrong", false}, {"", false}, {"righ", false}, {"right\x00", false}}
	for _, tc := range tests {
		srvCh := make(chan error, 1)
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				srvCh <- err
				return
			}
			c, err := Accept(context.Background(), nc, pol, Options{})
			if c != nil {
				if c.Peer().Auth != "token" || c.Peer().UID != -1 || c.Peer().Role != RoleTool {
					err = errors.New("bad peer info " + c.Peer().String())
				}
				_ = c.Close()
				<-c.Done()
			}
			srvCh <- err
		}()
		c, err := Dial(context.Background(), "tcp", ln.Addr().String(), Hello{Role: RoleTool, Token: tc.token}, Options{})
		serr := <-srvCh
		if tc.ok {
			if err != nil || serr != nil {
				t.Fatalf("token %q: %v / %v", tc.token, err, serr)
			}
			if c.Peer().Name != "master" || c.Peer().Role != RoleMaster || c.Peer().PID != os.Getpid() {
				t.Errorf("dialer's peer info %+v", c.Peer())
			}
			_ = c.Close()
			<-c.Done()
			continue
		}
		if !errors.Is(err, ErrUnauthorized) || !errors.Is(serr, ErrUnauthorized) {
			t.Errorf("token %q: %v / %v, want ErrUnauthorized", tc.token, err, serr)
		}
	}
}

func TestPeerCredOnUnixSocket(t *testing.T) {
	leakCheck(t)
	uid := os.Getuid()
	tests := []struct {
		name  string
		pol   AcceptPolicy
		token string
		auth  string // "" = rejected
	}{
		{"own uid admitted", AcceptPolicy{}, "", "uid"},
		{"uid list", AcceptPolicy{AllowUIDs: []int{uid + 1, uid}}, "", "uid"},
		{"other uid rejected", AcceptPolicy{AllowUIDs: []int{uid + 1}}, "", ""},
		{"token as alternative", AcceptPolicy{AllowUIDs: []int{uid + 1}, Token: "t"}, "t", "token"},
		{"wrong token as alternative", AcceptPolicy{AllowUIDs: []int{uid + 1}, Token: "t"}, "x", ""},
		{"uid auth disabled", AcceptPolicy{NoUIDAuth: true, Token: "t"}, "", ""},
		{"uid auth disabled, token", AcceptPolicy{NoUIDAuth: true, Token: "t"}, "t", "token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, a := unixConns(t)
			cli, srv, cerr, serr := handshakePair(t, d, a, Hello{Role: RoleClient, Token: tc.token}, tc.pol, Options{}, Options{})
			if tc.auth == "" {
				if !errors.Is(cerr, ErrUnauthorized) || !errors.Is(serr, ErrUnauthorized) {
					t.Fatalf("errors %v / %v, want ErrUnauthorized", cerr, serr)
				}
				return
			}
			if cerr != nil || serr != nil {
				t.Fatalf("handshake: %v / %v", cerr, serr)
			}
			if p := srv.Peer(); p.Auth != tc.auth || p.UID != uid || p.PID != os.Getpid() {
				t.Fatalf("acceptor's peer info %+v", p)
			}
			if p := cli.Peer(); p.UID != uid || p.PID != os.Getpid() {
				t.Fatalf("dialer's peer info %+v", p)
			}
		})
	}
}

func TestRolesAndCheck(t *testing.T) {
	leakCheck(t)
	tests := []struct {
		name string
		role string
		pol  AcceptPolicy
		want *Error // nil = admitted
	}{
		{"known role", RoleDaemon, AcceptPolicy{Open: true}, nil},
		{"unknown role", "admin", AcceptPolicy{Open: true}, ErrInvalid},
		{"role not allowed", RoleClient, AcceptPolicy{Open: true, Roles: []string{RoleTool, RoleDaemon}}, ErrPermission},
		{"check vetoes", RoleTool, AcceptPolicy{Open: true, Check: func(h *Hello, p PeerInfo) error {
			if h.Name == "dyntop" {
				return Errorf(ErrBusy, "master is draining")
			}
			return nil
		}}, ErrBusy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cn, sn := net.Pipe()
			_, _, cerr, serr := handshakePair(t, cn, sn, Hello{Role: tc.role, Name: "dyntop"}, tc.pol, Options{}, Options{})
			if tc.want == nil {
				if cerr != nil || serr != nil {
					t.Fatalf("%v / %v", cerr, serr)
				}
				return
			}
			if !errors.Is(cerr, tc.want) || !errors.Is(serr, tc.want) {
				t.Fatalf("errors %v / %v, want %s", cerr, serr, tc.want.Code)
			}
		})
	}
}

func TestHandshakeDeadlines(t *testing.T) {
	leakCheck(t)
	t.Run("dialer says nothing", func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		start := time.Now()
		_, err := Accept(context.Background(), sn, AcceptPolicy{Open: true}, Options{HelloTimeout: 100 * time.Millisecond})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Accept = %v, want ErrTimeout", err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("took %v", el)
		}
	})
	t.Run("acceptor never answers", func(t *testing.T) {
		cn, sn := net.Pipe()
		defer sn.Close()
		go func() { _, _ = NewReader(sn, 0).ReadFrame() }() // swallow the hello, say nothing
		_, err := Client(context.Background(), cn, Hello{Role: RoleTool}, Options{HelloTimeout: 100 * time.Millisecond})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Client = %v, want ErrTimeout", err)
		}
	})
	t.Run("context deadline first", func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := Accept(ctx, sn, AcceptPolicy{Open: true}, Options{})
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Accept = %v", err)
		}
	})
	t.Run("context canceled", func(t *testing.T) {
		cn, sn := net.Pipe()
		defer cn.Close()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		_, err := Accept(ctx, sn, AcceptPolicy{Open: true}, Options{})
		if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Accept = %v", err)
		}
	})
	t.Run("deadline cleared after handshake", func(t *testing.T) {
		cli, _ := pipePair(t, Options{HelloTimeout: 50 * time.Millisecond}, Options{Handler: echoMux().Serve, HelloTimeout: 50 * time.Millisecond})
		time.Sleep(120 * time.Millisecond)
		var p Ping
		if err := cli.Call(context.Background(), KindPing, &Ping{Seq: 2}, &p); err != nil || p.Seq != 2 {
			t.Fatalf("call after the hello timeout elapsed: %v", err)
		}
	})
}

func TestHandshakeRejectsNonHello(t *testing.T) {
	leakCheck(t)
	cn, sn := net.Pipe()
	defer cn.Close()
	errCh := make(chan error, 1)
	go func() {
		_, err := Accept(context.Background(), sn, AcceptPolicy{Open: true}, Options{})
		errCh <- err
	}()
	b := AppendEnvelope(nil, &Envelope{V: 1, ID: 1, Kind: KindPing})
	if _, err := cn.Write(AppendFrame(nil, b)); err != nil {
		t.Fatal(err)
	}
	f, err := NewReader(cn, 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	env, err := DecodeEnvelope(f)
	if err != nil || env.Err == nil || env.Err.Code != CodeMalformed || env.ID != 1 {
		t.Fatalf("reply %+v, %v", env, err)
	}
	if err := <-errCh; !errors.Is(err, ErrMalformed) {
		t.Fatalf("Accept = %v", err)
	}
}

func TestHandshakeOversizeHello(t *testing.T) {
	leakCheck(t)
	cn, sn := net.Pipe()
	defer cn.Close()
	errCh := make(chan error, 1)
	go func() {
		_, err := Accept(context.Background(), sn, AcceptPolicy{Open: true}, Options{})
		errCh <- err
	}()
	// claims 1 MiB: over the pre-authentication limit
	go func() { _, _ = cn.Write(AppendFrame(nil, make([]byte, 1<<20))) }()
	f, err := NewReader(cn, 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if env, err := DecodeEnvelope(f); err != nil || env.Err == nil || env.Err.Code != CodeTooLarge {
		t.Fatalf("reply %+v, %v", env, err)
	}
	if err := <-errCh; !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Accept = %v", err)
	}
}

func TestDialErrors(t *testing.T) {
	leakCheck(t)
	_, err := Dial(context.Background(), "unix", t.TempDir()+"/none", Hello{Role: RoleTool}, Options{})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial to nothing = %v", err)
	}
}

// A hello over the pre-authentication limit fails with a message saying
// so: locally on the dialing side, and in the acceptor's reply for a
// dialer that sends one anyway.
func TestOversizeHelloIsExplained(t *testing.T) {
	leakCheck(t)
	long := strings.Repeat("n", helloMaxFrame)
	cn, sn := net.Pipe()
	defer cn.Close()
	_, err := Client(context.Background(), cn, Hello{Role: RoleTool, Name: long}, Options{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "allowed before authentication") {
		t.Fatalf("Client with a long name = %v", err)
	}
	sn.Close()

	cn, sn = net.Pipe()
	defer cn.Close()
	errCh := make(chan error, 1)
	go func() {
		_, err := Accept(context.Background(), sn, AcceptPolicy{Open: true}, Options{})
		errCh <- err
	}()
	body, _ := Marshal(&Hello{Min: 1, Max: 1, Role: RoleTool, Name: long})
	go func() {
		_, _ = cn.Write(AppendFrame(nil, AppendEnvelope(nil, &Envelope{V: 1, ID: 1, Kind: KindHello, Body: body})))
	}()
	f, err := NewReader(cn, 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	env, err := DecodeEnvelope(f)
	if err != nil || env.Err == nil || env.Err.Code != CodeTooLarge || env.ID != 1 || !strings.Contains(env.Err.Msg, "before authentication") {
		t.Fatalf("reply %+v %+v, %v", env, env.Err, err)
	}
	if err := <-errCh; !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Accept = %v", err)
	}
}

// An oversize hello is answered with too_large as soon as its length is
// read, over real sockets, whether the dialer sends the whole body or
// announces more than it sends (a wrong length: before the fix the acceptor
// waited for the missing bytes until the hello deadline and closed without
// a word).
func TestOversizeHelloAnsweredAtOnce(t *testing.T) {
	leakCheck(t)
	tests := []struct {
		name           string
		network        string
		announce, send int
	}{
		{"whole body, tcp", "tcp", 64 << 10, 64 << 10},
		{"whole body, unix", "unix", 64 << 10, 64 << 10},
		{"short body, tcp", "tcp", 1 << 20, 8 << 10},
		{"short body, unix", "unix", 1 << 20, 8 << 10},
		{"header only, unix", "unix", 1 << 20, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if tc.network == "unix" {
				addr = t.TempDir() + "/s"
			}
			ln, err := net.Listen(tc.network, addr)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			srv := &Server{Policy: AcceptPolicy{Open: true}, Options: Options{HelloTimeout: 2 * time.Second}}
			served := make(chan struct{})
			go func() { _ = srv.Serve(ctx, ln); close(served) }()
			t.Cleanup(func() { cancel(); <-served })
			nc, err := net.Dial(tc.network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = nc.Close() })
			frame := binary.BigEndian.AppendUint32(nil, uint32(tc.announce))
			if tc.send > 0 {
				frame = append(frame, AppendEnvelope(nil, &Envelope{V: 1, ID: 1, Kind: KindHello})...)
				frame = append(frame, make([]byte, tc.send)...)
			}
			go func() { _, _ = nc.Write(frame) }()
			f, err := NewReader(nc, 0).ReadFrame()
			if err != nil {
				t.Fatalf("no reply to the oversize hello: %v", err)
			}
			env, err := DecodeEnvelope(f)
			if err != nil || env.Err == nil || env.Err.Code != CodeTooLarge || env.ID != 1 || env.Kind != KindHello {
				t.Fatalf("reply %+v (err %+v), %v; want a too_large hello reply at id 1", env, env.Err, err)
			}
		})
	}
}
