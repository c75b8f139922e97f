package master

import (
	"bufio"
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// Requests that ask for absurd sizes are refused at the master with an
// ErrLimit naming the limit, before anything is allocated for them, and
// leave the DVM as it was (issue 11 item 1: one such request used to make
// the master allocate ~24 GB and die, taking every job with it).
func TestLaunchAndChangeBounds(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2, func(c *Config) { c.Limits.ProcsPerJob = 3 })
	job, err := d.launch(wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: 2, Oversubscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := func(m map[string]any) func() error {
		return func() error {
			b, err := msgpack.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return d.c.Conn().Call(ctx, wire.KindJobLaunch, msgpack.RawMessage(b), nil)
		}
	}
	tests := []struct {
		name string
		do   func() error
		want *wire.Error
		msg  string
	}{
		// First the cases that fail cleanly without bounds, then those that
		// would exhaust the machine (the loop stops at the first failure).
		{"launch 10^9", func() error {
			_, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 1_000_000_000})
			return err
		}, wire.ErrLimit, "procs-per-job of 3"},
		{"raw launch n=-1", raw(map[string]any{"argv": []string{"true"}, "n": -1}), wire.ErrMalformed, "negative"},
		{"raw launch n=2^32+1", raw(map[string]any{"argv": []string{"true"}, "n": int64(1<<32 + 1)}), wire.ErrMalformed, "does not fit"},
		{"ADD past the job limit", func() error {
			_, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
			return err
		}, wire.ErrLimit, "procs-per-job of 3"},
		{"ADD 10^9", func() error {
			_, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 1_000_000_000})
			return err
		}, wire.ErrLimit, "procs-per-change"},
		{"launch 10^9 oversubscribed", func() error {
			_, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 1_000_000_000, Oversubscribe: true})
			return err
		}, wire.ErrLimit, "docs/limits.md"},
		{"long name", func() error {
			_, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 1, Name: strings.Repeat("n", 5000)})
			return err
		}, wire.ErrLimit, "name-bytes"},
	}
	for _, tc := range tests {
		ok := t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %s naming %q", err, tc.want.Code, tc.msg)
			}
		})
		if !ok {
			break
		}
	}
	st, err := d.c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Nodes[0].Used+st.Nodes[1].Used != 2 {
		t.Errorf("refused requests changed the DVM: %d jobs, %d+%d slots used", len(st.Jobs), st.Nodes[0].Used, st.Nodes[1].Used)
	}
}

// A DVM of more nodes than the limit is refused before anything starts.
func TestTooManyNodes(t *testing.T) {
	t.Parallel()
	nodes := make([]alloc.Node, 5)
	for i := range nodes {
		nodes[i] = alloc.Node{Name: "n" + strconv.Itoa(i), Slots: 1}
	}
	env := func(k string) string {
		if k == "DYNRT_LIMIT_NODES" {
			return "4"
		}
		return ""
	}
	_, err := Start(context.Background(), Config{Dir: t.TempDir(), Nodes: nodes, Env: env, Logger: testLogger()})
	if !errors.Is(err, wire.ErrLimit) || !strings.Contains(err.Error(), "nodes of 4") {
		t.Fatalf("Start with 5 nodes and DYNRT_LIMIT_NODES=4: %v", err)
	}
}

// rawTool is a tool connection driven by hand, so that the test decides
// what is sent and whether replies are read.
func rawTool(t testing.TB, network, addr, token string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout(network, addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	body, _ := wire.Marshal(&wire.Hello{Min: wire.ProtoMin, Max: wire.ProtoMax, Role: wire.RoleTool, Name: "raw", Token: token})
	frame := wire.AppendFrame(nil, wire.AppendEnvelope(nil, &wire.Envelope{V: wire.ProtoMax, ID: 1, Kind: wire.KindHello, Body: body}))
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	rep, err := wire.NewReader(bufio.NewReader(nc), 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if env, err := wire.DecodeEnvelope(rep); err != nil || env.Err != nil {
		t.Fatalf("hello: %v %v", err, env.Err)
	}
	_ = nc.SetDeadline(time.Time{})
	return nc
}

// flood connects a tool that sends n pings and never reads, and returns
// once the master has stopped taking them in (its goroutine count no longer
// changes).
func flood(tb testing.TB, d *testDVM, n int) net.Conn {
	nc := rawTool(tb, "unix", d.m.Info().Socket, "")
	go func() {
		var out []byte
		for i := range n {
			out = wire.AppendFrame(out, wire.AppendEnvelope(nil, &wire.Envelope{V: wire.ProtoMax, ID: uint64(2*i + 3), Kind: wire.KindPing}))
		}
		_ = nc.SetWriteDeadline(time.Now().Add(time.Minute))
		_, _ = nc.Write(out) // blocks once the master stops reading
	}()
	last, steady := -1, 0
	for deadline := time.Now().Add(60 * time.Second); steady < 5 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		if n := runtime.NumGoroutine(); n == last {
			steady++
		} else {
			last, steady = n, 0
		}
	}
	return nc
}

// BenchmarkStatusWhileFlooded: the time of `dvm status` while another
// client has filled its connection with requests it never reads
// (invariant f wants it under a second).
func BenchmarkStatusWhileFlooded(b *testing.B) {
	d := startDVM(b, 1, 1)
	flood(b, d, 40000)
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.c.State(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// usage is what the test process holds: goroutines, and heap plus stacks
// after a collection.
func usage() (goroutines int, bytes uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapInuse + ms.StackInuse
}

// statusAnswered checks invariant (f): dvm.state is answered, on the
// connection the test already had and on a new one.
func statusAnswered(t *testing.T, d *testDVM) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := d.c.State(ctx); err != nil {
		t.Fatalf("dvm status on an open connection: %v", err)
	}
	c := d.attach()
	defer c.Close()
	if _, err := c.State(ctx); err != nil {
		t.Fatalf("dvm status on a new connection: %v", err)
	}
}

// A client that sends requests and never reads the replies gets at most
// wire.DefaultMaxInflight of them served at once; the rest are refused
// and then it is no longer read, so the master's memory stays bounded and
// other clients are still answered (issue 11 item 13: 60,000 requests used
// to hold 525 MiB).
func TestClientThatNeverReads(t *testing.T) {
	d := startDVM(t, 1, 1)
	g0, b0 := usage()
	const requests = 40000
	nc := flood(t, d, requests)
	g1, b1 := usage()
	t.Logf("while the client does not read: %d more goroutines, %d KiB more in use", g1-g0, (int64(b1)-int64(b0))/1024)
	if g1-g0 > wire.DefaultMaxInflight+100 {
		t.Errorf("%d goroutines serve a client that does not read (limit %d in flight)", g1-g0, wire.DefaultMaxInflight)
	}
	if grow := int64(b1) - int64(b0); grow > 96<<20 {
		t.Errorf("memory grew by %d MiB for a client that does not read", grow>>20)
	}
	statusAnswered(t, d)

	// Once it reads, every request has its answer: a pong, or the limit
	// error that says what to do.
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	fr := wire.NewReader(bufio.NewReader(nc), 0)
	codes := map[wire.Code]int{}
	for range requests {
		b, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v replies: %v", codes, err)
		}
		env, err := wire.DecodeEnvelope(b)
		if err != nil {
			t.Fatal(err)
		}
		var code wire.Code
		if env.Err != nil {
			code = env.Err.Code
			if code == wire.CodeLimit && !strings.Contains(env.Err.Msg, "read their replies") {
				t.Errorf("limit error without advice: %q", env.Err.Msg)
			}
		}
		codes[code]++
	}
	t.Logf("replies by code: %v", codes)
	if codes[""] == 0 || codes[wire.CodeLimit] == 0 || codes[""]+codes[wire.CodeLimit] != requests {
		t.Errorf("replies by code %v; want pongs and limit errors for all %d requests", codes, requests)
	}
}

// Unauthenticated connections that send most of a hello and stall cost
// little: at most wire.DefaultMaxHandshakes per listener are read at once,
// with small buffers, each until the hello deadline, and the unix socket
// still admits tools (issue 11 item 13: 3,000 of them used to hold 305
// MiB).
func TestStalledHandshakes(t *testing.T) {
	d := startDVM(t, 1, 1)
	addr := d.m.Info().TCP
	if addr == "" {
		t.Fatal("the master has no TCP listener")
	}
	g0, b0 := usage()
	const conns = 300
	head := []byte{0, 0, 0xf0, 0} // announces a 61,440-byte hello
	stalled := make([]net.Conn, 0, conns)
	for range conns {
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer nc.Close()
		_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = nc.Write(append(head, make([]byte, 60000)...)) // may block: nobody reads it yet
		stalled = append(stalled, nc)
	}
	time.Sleep(time.Second) // let the master take in what it will
	g1, b1 := usage()
	t.Logf("%d stalled handshakes: %d more goroutines, %d KiB more in use", len(stalled), g1-g0, (int64(b1)-int64(b0))/1024)
	if g1-g0 > wire.DefaultMaxHandshakes+50 {
		t.Errorf("%d goroutines for %d stalled handshakes (limit %d at once)", g1-g0, conns, wire.DefaultMaxHandshakes)
	}
	if grow := int64(b1) - int64(b0); grow > 8<<20 {
		t.Errorf("memory grew by %d MiB for %d stalled handshakes", grow>>20, conns)
	}
	statusAnswered(t, d)
}
