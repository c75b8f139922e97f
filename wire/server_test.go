package wire

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestServer(t *testing.T) {
	leakCheck(t)
	path := filepath.Join(t.TempDir(), "m.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// OnConn runs after the handshake, concurrently with the new Conn
	// serving requests, so a client may finish a call before OnConn has
	// run: collect the names through a channel instead of a snapshot.
	seen := make(chan string, 8)
	srv := &Server{
		Policy:  AcceptPolicy{Name: "master", Role: RoleMaster},
		Options: Options{Handler: echoMux().Serve},
		OnConn:  func(c *Conn) { seen <- c.Peer().Name },
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	var conns []*Conn
	for _, name := range []string{"a", "b", "c"} {
		c, err := Dial(context.Background(), "unix", path, Hello{Role: RoleDaemon, Name: name}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		closeAndWait(t, c)
		var p Ping
		if err := c.Call(context.Background(), KindPing, &Ping{Seq: 9}, &p); err != nil || p.Seq != 9 {
			t.Fatalf("%s: %v", name, err)
		}
		conns = append(conns, c)
	}
	// a failed handshake does not stop the server
	if _, err := Dial(context.Background(), "unix", path, Hello{Role: "bogus"}, Options{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bogus role: %v", err)
	}
	// a client that goes away is forgotten; the others keep working
	_ = conns[0].Close()
	<-conns[0].Done()
	if err := conns[1].Call(context.Background(), KindPing, &Ping{}, nil); err != nil {
		t.Fatal(err)
	}
	var peers []string
	for len(peers) < 3 {
		select {
		case name := <-seen:
			peers = append(peers, name)
		case <-time.After(5 * time.Second):
			t.Fatalf("OnConn saw only %v", peers)
		}
	}
	slices.Sort(peers)
	if !slices.Equal(peers, []string{"a", "b", "c"}) {
		t.Errorf("OnConn saw %v", peers)
	}
	select {
	case name := <-seen:
		t.Errorf("OnConn called for a failed handshake too (%q)", name)
	default:
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	for _, c := range conns[1:] {
		select {
		case <-c.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("client conn not closed by server shutdown")
		}
	}
	if _, err := Dial(context.Background(), "unix", path, Hello{Role: RoleTool}, Options{}); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

func TestServerListenerFailure(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "x.sock"))
	if err != nil {
		t.Fatal(err)
	}
	_ = ln.Close()
	if err := (&Server{}).Serve(context.Background(), ln); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}

// TestServerShutdownWritesDecidedReplies: a request whose handler is still
// running when Serve is canceled gets its reply before the connection
// closes (the master's stop answers job.wait calls this way).
func TestServerShutdownWritesDecidedReplies(t *testing.T) {
	leakCheck(t)
	path := filepath.Join(t.TempDir(), "m.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	mux := echoMux()
	mux.Handle("slow", func(context.Context, *Request) (any, error) {
		close(entered)
		<-release
		return &Ping{Seq: 42}, nil
	})
	srv := &Server{Policy: AcceptPolicy{Name: "master", Role: RoleMaster}, Options: Options{Handler: mux.Serve}}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	c, err := Dial(context.Background(), "unix", path, Hello{Role: RoleTool, Name: "t"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan error, 1)
	go func() {
		var p Ping
		err := c.Call(context.Background(), "slow", nil, &p)
		if err == nil && p.Seq != 42 {
			err = errors.New("wrong reply")
		}
		got <- err
	}()
	<-entered
	cancel()
	time.Sleep(20 * time.Millisecond) // the shutdown is waiting for the handler now
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("reply lost in the shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
