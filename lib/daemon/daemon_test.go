package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/wire"
)

func TestMasterAddr(t *testing.T) {
	cases := []struct{ in, network, addr string }{
		{"/run/x/master.sock", "unix", "/run/x/master.sock"},
		{"unix:///run/x.sock", "unix", "/run/x.sock"},
		{"unix:/run/x.sock", "unix", "/run/x.sock"},
		{"127.0.0.1:4000", "tcp", "127.0.0.1:4000"},
		{"tcp://h1:4000", "tcp", "h1:4000"},
	}
	for _, c := range cases {
		if n, a := masterAddr(c.in); n != c.network || a != c.addr {
			t.Errorf("masterAddr(%q) = %s %s, want %s %s", c.in, n, a, c.network, c.addr)
		}
	}
}

func TestClientName(t *testing.T) {
	c, err := parseClientName(procenv.ClientName("abc.3", 17))
	if err != nil || c != (Caller{Job: "abc.3", Rank: 17}) {
		t.Errorf("round trip: %+v %v", c, err)
	}
	for _, bad := range []string{"", "abc", "abc/", "/3", "abc/-1", "abc/x", "abc/4294967296"} {
		if _, err := parseClientName(bad); !errors.Is(err, wire.ErrPermission) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestSetHist(t *testing.T) {
	var h setHist
	for _, v := range []uint32{0, 2, 1, 2} {
		h.add(wire.PsetInfo{Name: "s", Version: v, Size: v + 10})
	}
	var got []uint32
	for _, p := range h.versions {
		got = append(got, p.Version)
	}
	if !slices.Equal(got, []uint32{0, 1, 2}) || h.latest().Version != 2 {
		t.Errorf("versions %v", got)
	}
	if p, ok := h.at(1); !ok || p.Size != 11 {
		t.Errorf("at(1) = %+v %v", p, ok)
	}
	if _, ok := h.at(5); ok {
		t.Error("at(5) found")
	}
}

// TestCacheRetention: the daemon keeps the versions a push says the
// master keeps, and forgets a delta set and its change record with it.
func TestCacheRetention(t *testing.T) {
	d := &Daemon{node: "n1", jobs: map[string]*jobCache{}}
	d.cacheJob(&wire.JobData{Gen: 1, Job: "j", App: "a"}, nil)
	const app, delta = "mpi://app/a", "mpi://rte/a/rc/1"
	for v := range uint32(6) {
		d.cacheJob(nil, &wire.PsetPush{Job: "j", Keep: 4, Defined: []wire.PsetInfo{{Name: app, Version: v}}})
	}
	d.cacheJob(nil, &wire.PsetPush{Job: "j", Keep: 4, Defined: []wire.PsetInfo{{Name: delta}}})
	jc := d.jobs["j"]
	jc.rcs = newRCCache()
	rec := &wire.RC{Delta: delta, Job: "j"}
	jc.rcs.byDelta[delta], jc.rcs.order = rec, []*wire.RC{rec}
	h := jc.sets[app]
	if _, ok := h.at(1); ok || len(h.versions) != 4 || h.latest().Version != 5 {
		t.Errorf("kept %d versions (latest %d), version 1 present: want 4 (2-5)", len(h.versions), h.latest().Version)
	}
	d.cacheJob(nil, &wire.PsetPush{Job: "j", Deleted: []string{delta, app}})
	if jc.sets[delta] != nil || jc.rcs.byDelta[delta] != nil || len(jc.rcs.order) != 0 {
		t.Errorf("forgotten delta: set %v, record %v, %d records", jc.sets[delta], jc.rcs.byDelta[delta], len(jc.rcs.order))
	}
	if h := jc.sets[app]; h == nil || !h.deleted {
		t.Errorf("a deleted application set is kept as deleted: %+v", h)
	}
}

func TestBaseEnv(t *testing.T) {
	req := &wire.LaunchReq{Job: "dvm1.2", App: "a", Env: []string{
		"PATH=/bin", "DYNRT_RANK=9", "DYNRT_TEST=keep", "DYNRT_JOB=other", "DYNRT_DIR=/submitter/dir", "DYNRT_NODE_ADDR=1.2.3.4",
	}}
	// On the master's host: the DVM by id, the daemon's rendezvous
	// directory, no node address (processes use the host name).
	d := &Daemon{node: "n1", dvm: "dvm1", dvmRef: "dvm1", dir: "/run/d", sock: "/s/n1.sock", cfg: Config{Token: "tok"}}
	want := []string{
		"PATH=/bin", "DYNRT_TEST=keep", "DYNRT_DAEMON=/s/n1.sock", "DYNRT_DVM=dvm1", "DYNRT_DIR=/run/d", "DYNRT_JOB=dvm1.2", "DYNRT_APP=a",
		"DYNRT_NODE=n1", "DYNRT_NODE_INDEX=1", "DYNRT_TOKEN=tok", "DYNRT_SIZE=4",
	}
	if env := d.baseEnv(req, 4, 1); !slices.Equal(env, want) {
		t.Errorf("env\n got %q\nwant %q", env, want)
	}
	// On another host: the master's TCP address (with the token, works
	// without the submitter's rendezvous directory), this host's
	// directory, the node's address.
	d = &Daemon{node: "n2", dvm: "dvm1", dvmRef: "uri:tcp://198.18.0.1:4000", dir: "/h2/run", nodeAddr: "198.18.0.3", sock: "/h2/run/dvm1/n2.sock", cfg: Config{Token: "tok"}}
	want = []string{
		"PATH=/bin", "DYNRT_TEST=keep", "DYNRT_DAEMON=/h2/run/dvm1/n2.sock", "DYNRT_DVM=uri:tcp://198.18.0.1:4000", "DYNRT_DIR=/h2/run", "DYNRT_JOB=dvm1.2", "DYNRT_APP=a",
		"DYNRT_NODE=n2", "DYNRT_NODE_INDEX=2", "DYNRT_TOKEN=tok", "DYNRT_SIZE=4", "DYNRT_NODE_ADDR=198.18.0.3",
	}
	if env := d.baseEnv(req, 4, 2); !slices.Equal(env, want) {
		t.Errorf("remote env\n got %q\nwant %q", env, want)
	}
}

// fakeMaster accepts one daemon and records what it reports.
type fakeMaster struct {
	t      *testing.T
	conn   chan *wire.Conn
	events chan *wire.Request
}

func startFakeMaster(t *testing.T, dir string) (*fakeMaster, string) {
	return startFakeMasterReply(t, dir, wire.NodeRegisterReply{Index: 1, DVM: "dvm1"})
}

// startFakeMasterReply is startFakeMaster answering the registration with
// reg (heartbeat settings).
func startFakeMasterReply(t *testing.T, dir string, reg wire.NodeRegisterReply) (*fakeMaster, string) {
	t.Helper()
	sock, err := dvmdir.SocketPath(dir, "dvm1", "master.sock")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMaster{t: t, conn: make(chan *wire.Conn, 1), events: make(chan *wire.Request, 100)}
	mux := wire.NewMux()
	wire.HandleTyped(mux, wire.KindNodeRegister, func(_ context.Context, req *wire.Request, b *wire.NodeRegister) (any, error) {
		f.conn <- req.Conn
		return &reg, nil
	})
	srv := &wire.Server{
		Policy:  wire.AcceptPolicy{Name: "dvm1", Role: wire.RoleMaster},
		Options: wire.Options{Handler: mux.Serve, OnEvent: func(ev *wire.Request) { f.events <- ev }},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f, sock
}

// next returns the next event of kind, decoded into v.
func (f *fakeMaster) next(kind string, v any) {
	f.t.Helper()
	for {
		select {
		case ev := <-f.events:
			if ev.Kind != kind {
				continue
			}
			if err := ev.Decode(v); err != nil {
				f.t.Fatal(err)
			}
			return
		case <-time.After(10 * time.Second):
			f.t.Fatalf("no %s event", kind)
		}
	}
}

// TestDaemonAlone drives a daemon from a fake master: launch, output,
// exits, kill with escalation, stop.
func TestDaemonAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := dvmdir.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	f, sock := startFakeMaster(t, dir)
	runErr := make(chan error, 1)
	var ready string
	readyCh := make(chan struct{})
	go func() {
		runErr <- Run(context.Background(), Config{
			Master: sock, Node: "n1", Slots: 4, DVM: "dvm1", Dir: dir, KillGrace: 200 * time.Millisecond,
			Ready: func(s string) { ready = s; close(readyCh) },
		})
	}()
	var mc *wire.Conn
	select {
	case mc = <-f.conn:
	case err := <-runErr:
		t.Fatal(err)
	}
	<-readyCh
	if want := filepath.Join(dir, "dvm1", "n1.sock"); ready != want {
		t.Errorf("client socket %q, want %q", ready, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	body := &wire.LaunchReq{
		Job: "dvm1.1", App: "a", ID: 1, Ranks: wire.Span(4, 5), Output: wire.OutputFlags{Forward: true},
		Argv: []string{"/bin/sh", "-c", `echo "r$DYNRT_RANK"; exit $DYNRT_RANK`},
		Data: &wire.JobData{Gen: 1, ID: 1, Job: "dvm1.1", App: "a", Size: 6, Placement: []wire.Placement{{Node: "n1", Ranks: wire.Span(4, 5)}}},
	}
	var rep wire.LaunchReply
	if err := mc.Call(ctx, wire.KindNodeLaunch, body, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Started) != 2 || rep.Started[0].Rank != 4 || rep.Started[1].Rank != 5 || rep.Started[0].PID <= 0 {
		t.Fatalf("started %+v", rep.Started)
	}
	lines, exits := map[uint32]string{}, map[uint32]int{}
	for len(exits) < 2 {
		select {
		case ev := <-f.events:
			switch ev.Kind {
			case wire.KindProcOutput:
				var l wire.OutputLine
				_ = ev.Decode(&l)
				if _, done := exits[l.Rank]; done {
					t.Errorf("output of rank %d after its exit", l.Rank)
				}
				lines[l.Rank] = string(l.Line)
			case wire.KindProcExited:
				var e wire.ProcExited
				_ = ev.Decode(&e)
				exits[e.Rank] = e.Code
			}
		case <-ctx.Done():
			t.Fatal("no exits")
		}
	}
	if lines[4] != "r4" || lines[5] != "r5" || exits[4] != 4 || exits[5] != 5 {
		t.Errorf("lines %v exits %v", lines, exits)
	}

	// A program that does not exist fails its rank with 127.
	body.Ranks, body.Argv = wire.Span(0, 0), []string{"/nonexistent"}
	rep = wire.LaunchReply{}
	if err := mc.Call(ctx, wire.KindNodeLaunch, body, &rep); err != nil || len(rep.Started) != 0 {
		t.Fatalf("launch of a missing program: %+v %v", rep, err)
	}
	var ex wire.ProcExited
	f.next(wire.KindProcExited, &ex)
	if ex.Rank != 0 || ex.Code != 127 || ex.Err == "" {
		t.Errorf("missing program reported as %+v", ex)
	}

	// Kill: one process ignores SIGTERM and gets SIGKILL after the grace.
	body.Ranks, body.Argv = wire.Span(1, 2), []string{"/bin/sh", "-c", `[ "$DYNRT_RANK" = 1 ] && trap "" TERM; echo up; exec sleep 30`}
	if err := mc.Call(ctx, wire.KindNodeLaunch, body, &rep); err != nil {
		t.Fatal(err)
	}
	var l wire.OutputLine
	f.next(wire.KindProcOutput, &l)
	f.next(wire.KindProcOutput, &l)
	var kr wire.KillReply
	if err := mc.Call(ctx, wire.KindNodeKill, &wire.KillReq{Job: "dvm1.1"}, &kr); err != nil || kr.N != 2 {
		t.Fatalf("kill: %+v %v", kr, err)
	}
	sigs := map[uint32]int{}
	for range 2 {
		f.next(wire.KindProcExited, &ex)
		if !ex.Forced {
			t.Errorf("killed process not marked forced: %+v", ex)
		}
		sigs[ex.Rank] = ex.Signal
	}
	if sigs[1] != int(syscall.SIGKILL) || sigs[2] != int(syscall.SIGTERM) {
		t.Errorf("signals %v", sigs)
	}

	// Stop: running processes are terminated and reported, Run returns,
	// the socket is gone.
	body.Ranks, body.Argv = wire.Span(3, 3), []string{"sleep", "30"}
	if err := mc.Call(ctx, wire.KindNodeLaunch, body, &rep); err != nil {
		t.Fatal(err)
	}
	if err := mc.Call(ctx, wire.KindNodeStop, &wire.NodeStopReq{}, nil); err != nil {
		t.Fatal(err)
	}
	f.next(wire.KindProcExited, &ex)
	if ex.Rank != 3 || ex.Signal != int(syscall.SIGTERM) {
		t.Errorf("stop reported %+v", ex)
	}
	if err := <-runErr; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("client socket left: %v", err)
	}
}

func TestRunWrongDVM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := dvmdir.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	_, sock := startFakeMaster(t, dir)
	err := Run(context.Background(), Config{Master: sock, Node: "n1", DVM: "other", Dir: dir})
	if err == nil || !strings.Contains(err.Error(), `runs DVM "dvm1", not "other"`) {
		t.Errorf("Run: %v", err)
	}
}

// --prefix puts DIR/bin and DIR/lib first, keeping what was there.
func TestPrefixEnv(t *testing.T) {
	cases := []struct {
		in, want []string
	}{
		{in: []string{"A=1", "PATH=/usr/bin", "LD_LIBRARY_PATH=/x"}, want: []string{"A=1", "PATH=/p/bin:/usr/bin", "LD_LIBRARY_PATH=/p/lib:/x"}},
		{in: []string{"A=1"}, want: []string{"A=1", "PATH=/p/bin:" + proc.DefaultPath, "LD_LIBRARY_PATH=/p/lib"}},
		{in: []string{"PATH=", "LD_LIBRARY_PATH="}, want: []string{"PATH=/p/bin", "LD_LIBRARY_PATH=/p/lib"}},
	}
	for _, c := range cases {
		in := slices.Clone(c.in)
		if got := PrefixEnv(in, "/p"); !slices.Equal(got, c.want) {
			t.Errorf("PrefixEnv(%q) = %q, want %q", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("PrefixEnv changed its argument: %q", in)
		}
	}
}
