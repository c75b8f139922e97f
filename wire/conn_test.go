package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCallConcurrentBothWays(t *testing.T) {
	leakCheck(t)
	for _, transport := range []string{"pipe", "unix"} {
		t.Run(transport, func(t *testing.T) {
			opts := Options{Handler: echoMux().Serve}
			var cli, srv *Conn
			if transport == "pipe" {
				cli, srv = pipePair(t, opts, opts)
			} else {
				cli, srv = unixPair(t, opts, opts)
			}
			var wg sync.WaitGroup
			for g := 0; g < 100; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					c := cli
					if g%4 == 0 {
						c = srv // the accepting side calls too (even ids)
					}
					for i := 0; i < 20; i++ {
						seq := uint64(g*1000 + i)
						var got Ping
						if err := c.Call(context.Background(), KindPing, &Ping{Seq: seq}, &got); err != nil {
							t.Errorf("call %d: %v", seq, err)
							return
						}
						if got.Seq != seq {
							t.Errorf("call %d got the reply of %d", seq, got.Seq)
						}
					}
				}(g)
			}
			wg.Wait()
		})
	}
}

func TestIDParity(t *testing.T) {
	leakCheck(t)
	var cliIDs, srvIDs sync.Map
	record := func(m *sync.Map) Handler {
		return func(ctx context.Context, req *Request) (any, error) {
			m.Store(req.ID, true)
			return nil, nil
		}
	}
	cli, srv := pipePair(t, Options{Handler: record(&cliIDs)}, Options{Handler: record(&srvIDs)})
	for i := 0; i < 5; i++ {
		if err := cli.Call(context.Background(), "x", nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := srv.Call(context.Background(), "x", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	srvIDs.Range(func(k, _ any) bool { // requests the server saw came from the dialer
		if k.(uint64)%2 != 1 {
			t.Errorf("dialer used even id %d", k)
		}
		return true
	})
	cliIDs.Range(func(k, _ any) bool {
		if id := k.(uint64); id%2 != 0 || id == 0 {
			t.Errorf("acceptor used id %d", id)
		}
		return true
	})
}

func TestCallDeadlineAndCancel(t *testing.T) {
	leakCheck(t)
	release := make(chan struct{})
	var served atomic.Int32
	m := echoMux()
	m.Handle("slow", func(ctx context.Context, req *Request) (any, error) {
		served.Add(1)
		<-release
		return &Ping{Seq: 99}, nil
	})
	cli, _ := pipePair(t, Options{}, Options{Handler: m.Serve})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var p Ping
	err := cli.Call(ctx, "slow", nil, &p)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call = %v, want ErrTimeout wrapping DeadlineExceeded", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	err = cli.Call(ctx2, "slow", nil, &p)
	if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Call = %v, want ErrCanceled wrapping Canceled", err)
	}
	// already-canceled context: nothing is sent
	n := served.Load()
	if err := cli.Call(ctx2, "slow", nil, nil); !errors.Is(err, ErrCanceled) {
		t.Fatalf("Call on canceled ctx = %v", err)
	}

	// The late replies arrive after release and are dropped; the
	// connection keeps working and p was never written.
	close(release)
	for i := 0; i < 3; i++ {
		var got Ping
		if err := cli.Call(context.Background(), KindPing, &Ping{Seq: 7}, &got); err != nil || got.Seq != 7 {
			t.Fatalf("after late replies: %v %+v", err, got)
		}
	}
	if p.Seq != 0 {
		t.Fatalf("a canceled call's reply was decoded: %+v", p)
	}
	if served.Load() != n {
		t.Fatalf("a call with an already-canceled context reached the peer")
	}
}

func TestCloseFailsPendingCalls(t *testing.T) {
	leakCheck(t)
	handlerCanceled := make(chan struct{})
	entered := make(chan struct{}, 10)
	var closes atomic.Int32
	srvOpts := Options{Handler: func(ctx context.Context, req *Request) (any, error) {
		entered <- struct{}{}
		<-ctx.Done() // canceled when the server side's connection dies
		if req.Kind == "block0" {
			close(handlerCanceled)
		}
		return nil, ctx.Err()
	}}
	cli, srv := pipePair(t, Options{OnClose: func(*Conn, error) { closes.Add(1) }}, srvOpts)

	errs := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func(i int) { errs <- cli.Call(context.Background(), fmt.Sprintf("block%d", i), nil, nil) }(i)
	}
	for i := 0; i < 5; i++ {
		<-entered
	}
	start := time.Now()
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "closed") {
				t.Fatalf("pending call = %v, want ErrClosed saying closed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("pending call did not fail after Close")
		}
	}
	if time.Since(start) > time.Second {
		t.Fatalf("pending calls took %v to fail", time.Since(start))
	}
	select {
	case <-handlerCanceled:
	case <-time.After(2 * time.Second):
		t.Fatal("peer's handler context not canceled when the connection went away")
	}
	<-cli.Done()
	<-srv.Done()
	if !errors.Is(cli.Err(), ErrClosed) || !errors.Is(srv.Err(), ErrClosed) {
		t.Fatalf("Err after close: %v / %v", cli.Err(), srv.Err())
	}
	if err := cli.Call(context.Background(), "x", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after Close = %v", err)
	}
	if err := cli.Notify("x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Notify after Close = %v", err)
	}
	_ = cli.Close()
	if closes.Load() != 1 {
		t.Fatalf("OnClose called %d times", closes.Load())
	}
}

func TestEventsInOrder(t *testing.T) {
	leakCheck(t)
	const n = 200
	got := make(chan uint64, n)
	cli, srv := unixPair(t, Options{OnEvent: func(ev *Request) {
		var p Ping
		if ev.Kind != "tick" || ev.ID != 0 || ev.Decode(&p) != nil {
			t.Errorf("bad event %+v", ev)
		}
		got <- p.Seq
	}}, Options{})
	for i := uint64(1); i <= n; i++ {
		if err := srv.Notify("tick", &Ping{Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= n; i++ {
		select {
		case s := <-got:
			if s != i {
				t.Fatalf("event %d arrived as #%d", s, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
	_ = cli
}

func TestErrorsCrossTheWire(t *testing.T) {
	leakCheck(t)
	m := NewMux()
	for _, s := range sentinels {
		m.Handle("fail."+string(s.Code), func(ctx context.Context, req *Request) (any, error) {
			return nil, Errorf(s, "boom %s: %w", s.Code, errors.New("inner"))
		})
	}
	m.Handle("plain", func(ctx context.Context, req *Request) (any, error) { return nil, errors.New("no code here") })
	m.Handle("wrapped", func(ctx context.Context, req *Request) (any, error) {
		return nil, fmt.Errorf("pset %q: %w", "x", ErrNotFound)
	})
	m.Handle("panic", func(ctx context.Context, req *Request) (any, error) { panic("oops") })
	cli, _ := pipePair(t, Options{}, Options{Handler: m.Serve})
	ctx := context.Background()

	for _, s := range sentinels {
		err := cli.Call(ctx, "fail."+string(s.Code), nil, nil)
		if !errors.Is(err, s) {
			t.Errorf("%s: %v does not match its sentinel", s.Code, err)
		}
		for _, other := range sentinels {
			if other != s && errors.Is(err, other) {
				t.Errorf("%s: also matches %s", s.Code, other.Code)
			}
		}
		if want := "boom " + string(s.Code) + ": inner"; err == nil || err.Error() != want {
			t.Errorf("%s: message %q, want %q", s.Code, err, want)
		}
	}
	if err := cli.Call(ctx, "plain", nil, nil); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "no code here") {
		t.Errorf("uncoded error = %v, want ErrInternal with the message", err)
	}
	if err := cli.Call(ctx, "wrapped", nil, nil); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `pset "x"`) {
		t.Errorf("wrapped sentinel = %v", err)
	}
	if err := cli.Call(ctx, "panic", nil, nil); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "oops") {
		t.Errorf("panicking handler = %v", err)
	}
	err := cli.Call(ctx, "no.such.kind", nil, nil)
	if !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), "no.such.kind") {
		t.Errorf("unknown kind = %v", err)
	}
	var we *Error
	if !errors.As(err, &we) || we.Code != CodeUnknownKind {
		t.Errorf("unknown kind is not a *Error with its code: %#v", err)
	}
	// still serving
	if err := cli.Call(ctx, "fail.busy", nil, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("after errors: %v", err)
	}
}

func TestNoHandlerAnswersUnknownKind(t *testing.T) {
	leakCheck(t)
	cli, _ := pipePair(t, Options{}, Options{})
	if err := cli.Call(context.Background(), "job.launch", nil, nil); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("Call = %v", err)
	}
}

func TestBodyDecodeErrors(t *testing.T) {
	leakCheck(t)
	m := echoMux()
	m.Handle("badreply", func(ctx context.Context, req *Request) (any, error) {
		return map[string]string{"seq": "not a number"}, nil
	})
	m.Handle("unencodable", func(ctx context.Context, req *Request) (any, error) {
		return make(chan int), nil
	})
	cli, _ := pipePair(t, Options{}, Options{Handler: m.Serve})
	ctx := context.Background()
	// request body of the wrong shape: the typed handler answers malformed
	err := cli.Call(ctx, KindPing, map[string]string{"seq": "x"}, nil)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), KindPing) {
		t.Fatalf("bad request body = %v", err)
	}
	// reply body of the wrong shape
	var p Ping
	if err := cli.Call(ctx, "badreply", nil, &p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad reply body = %v", err)
	}
	if err := cli.Call(ctx, "unencodable", nil, nil); !errors.Is(err, ErrInternal) {
		t.Fatalf("unencodable reply = %v", err)
	}
	// request that cannot be encoded fails locally
	if err := cli.Call(ctx, KindPing, make(chan int), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unencodable request = %v", err)
	}
	if err := cli.Call(ctx, KindPing, &Ping{Seq: 1}, &p); err != nil || p.Seq != 1 {
		t.Fatalf("still serving: %v", err)
	}
}

func TestOversizeMessages(t *testing.T) {
	leakCheck(t)
	m := echoMux()
	m.Handle("big", func(ctx context.Context, req *Request) (any, error) {
		return &KVGetReply{Value: make([]byte, 8000)}, nil
	})
	// the server reads at most 4 KiB frames; the client up to 16 MiB
	cli, _ := pipePair(t, Options{}, Options{Handler: m.Serve, MaxFrame: 4096})
	ctx := context.Background()

	// request over the server's limit: the server skips it and answers
	// too_large using the id from the frame's head
	err := cli.Call(ctx, KindKVPut, &KVPutReq{Key: "k", Value: make([]byte, 10000)}, nil)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), KindKVPut) {
		t.Fatalf("oversize request = %v", err)
	}
	// reply over the server's own limit: refused before sending
	if err := cli.Call(ctx, "big", nil, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize reply = %v", err)
	}
	var p Ping
	if err := cli.Call(ctx, KindPing, &Ping{Seq: 3}, &p); err != nil || p.Seq != 3 {
		t.Fatalf("after oversize: %v", err)
	}

	// a request over the caller's own limit is refused locally
	small, _ := pipePair(t, Options{MaxFrame: 100}, Options{Handler: m.Serve})
	if err := small.Call(ctx, KindKVPut, &KVPutReq{Value: make([]byte, 200)}, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("local oversize = %v", err)
	}
	if err := small.Call(ctx, KindPing, &Ping{Seq: 4}, &p); err != nil || p.Seq != 4 {
		t.Fatalf("after local oversize: %v", err)
	}
}

func TestEventCallbackPanicKeepsServing(t *testing.T) {
	leakCheck(t)
	got := make(chan string, 2)
	cli, srv := pipePair(t, Options{OnEvent: func(ev *Request) {
		if ev.Kind == "bad" {
			panic("event bug")
		}
		got <- ev.Kind
	}}, Options{})
	_ = srv.Notify("bad", nil)
	_ = srv.Notify("good", nil)
	select {
	case k := <-got:
		if k != "good" {
			t.Fatalf("got %q", k)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("event after a panicking callback not delivered")
	}
	if cli.Err() != nil {
		t.Fatalf("conn died: %v", cli.Err())
	}
}

// TestInlineKinds: requests of the kinds Options.Inline names are served
// one at a time, on the reader goroutine; other kinds still get answers
// while they queue.
func TestInlineKinds(t *testing.T) {
	leakCheck(t)
	var running, maxRunning atomic.Int32
	var mu sync.Mutex
	var order []uint64
	mux := echoMux()
	mux.Handle("inline", func(_ context.Context, req *Request) (any, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		var p Ping
		if err := req.Decode(&p); err != nil {
			return nil, err
		}
		mu.Lock()
		order = append(order, p.Seq)
		mu.Unlock()
		time.Sleep(time.Millisecond) // long enough for a second one to overlap, if it could
		return &p, nil
	})
	srvOpts := Options{Handler: mux.Serve, Inline: func(kind string) bool { return kind == "inline" }}
	cli, _ := unixPair(t, Options{}, srvOpts)
	// Twenty calls in flight at once.
	done := make(chan error, 20)
	for i := range 20 {
		seq := uint64(i)
		sent := make(chan struct{})
		go func() {
			var got Ping
			close(sent)
			err := cli.Call(context.Background(), "inline", &Ping{Seq: seq}, &got)
			if err == nil && got.Seq != seq {
				err = fmt.Errorf("call %d got the reply of %d", seq, got.Seq)
			}
			done <- err
		}()
		<-sent
	}
	// A ping (not inline) is still answered while inline requests queue.
	var p Ping
	if err := cli.Call(context.Background(), KindPing, &Ping{Seq: 99}, &p); err != nil || p.Seq != 99 {
		t.Fatalf("ping beside inline requests: %+v %v", p, err)
	}
	for range 20 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if m := maxRunning.Load(); m != 1 {
		t.Errorf("inline handlers ran %d at a time, want 1", m)
	}
	if len(order) != 20 {
		t.Fatalf("%d inline requests served, want 20", len(order))
	}
}

// TestReplyThen: a handler that ends the connection in ReplyThen.Then
// still gets its reply to the caller; Then runs after the write.
func TestReplyThen(t *testing.T) {
	leakCheck(t)
	mux := echoMux()
	var srv *Conn
	ready := make(chan struct{})
	ran := make(chan struct{})
	mux.Handle("stop", func(_ context.Context, req *Request) (any, error) {
		<-ready
		var p Ping
		if err := req.Decode(&p); err != nil {
			return nil, err
		}
		return ReplyThen{Reply: &p, Then: func() { srv.Close(); close(ran) }}, nil
	})
	cli, s := unixPair(t, Options{}, Options{Handler: mux.Serve})
	srv = s
	close(ready)
	var got Ping
	if err := cli.Call(context.Background(), "stop", &Ping{Seq: 7}, &got); err != nil || got.Seq != 7 {
		t.Fatalf("call: %+v, %v", got, err)
	}
	<-ran
	select {
	case <-cli.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed by Then")
	}
}

// TestInlineLater: an inline handler that returns Later has its quick part
// done in arrival order on the reader goroutine and its slow part on a
// goroutine of its own: a request sent after it sees the quick part's
// effect, and is answered while the slow part still runs.
func TestInlineLater(t *testing.T) {
	leakCheck(t)
	var mu sync.Mutex
	var log []string
	note := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	release := make(chan struct{})
	mux := echoMux()
	mux.Handle("slow", func(_ context.Context, req *Request) (any, error) {
		note("slow: registered")
		return Later(func() (any, error) {
			<-release
			note("slow: done")
			return &Ping{Seq: 1}, nil
		}), nil
	})
	mux.Handle("quick", func(_ context.Context, req *Request) (any, error) {
		note("quick")
		return nil, nil
	})
	srvOpts := Options{Handler: mux.Serve, Inline: func(kind string) bool { return kind == "slow" || kind == "quick" }}
	cli, _ := unixPair(t, Options{}, srvOpts)
	slow := make(chan error, 1)
	sent := make(chan struct{})
	go func() {
		var p Ping
		wait, err := cli.Start("slow", nil)
		close(sent)
		if err == nil {
			err = wait(context.Background(), &p)
		}
		if err == nil && p.Seq != 1 {
			err = fmt.Errorf("slow reply %+v", p)
		}
		slow <- err
	}()
	<-sent
	if err := cli.Call(context.Background(), "quick", nil, nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	want := []string{"slow: registered", "quick", "slow: done"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(log, want) {
		t.Errorf("order %q, want %q", log, want)
	}
}

// The in-flight bounds of a connection: requests over the count or the
// bytes of those being served get ErrLimit at once; once the served ones
// finish, requests are served again.
func TestInflightBounds(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		pad       int // body bytes of each blocked request
		admitted  int
		limitText string
	}{
		{"count", Options{MaxInflight: 3}, 10, 3, "3 requests of this connection are being served"},
		{"bytes", Options{MaxInflight: 100, MaxInflightBytes: 2500}, 1000, 2, "hold 2"},
		{"one always admitted", Options{MaxInflight: 100, MaxInflightBytes: 10}, 1000, 1, "the limit is 10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var started atomic.Int64
			srvOpts := tc.opts
			srvOpts.Handler = func(ctx context.Context, req *Request) (any, error) {
				started.Add(1)
				<-release
				return nil, nil
			}
			cli, _ := unixPair(t, Options{}, srvOpts)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs := make(chan error, tc.admitted+1)
			body := map[string]any{"pad": make([]byte, tc.pad)}
			for range tc.admitted {
				go func() { errs <- cli.Call(ctx, "block", body, nil) }()
			}
			for started.Load() < int64(tc.admitted) {
				time.Sleep(time.Millisecond)
			}
			err := cli.Call(ctx, "block", body, nil)
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tc.limitText) || !strings.Contains(err.Error(), "read their replies") {
				t.Fatalf("request over the bound: %v, want ErrLimit with %q", err, tc.limitText)
			}
			close(release)
			for range tc.admitted {
				if err := <-errs; err != nil {
					t.Errorf("admitted request: %v", err)
				}
			}
			if err := cli.Call(ctx, "block", body, nil); err != nil {
				t.Errorf("request after the others finished: %v", err)
			}
		})
	}
}
