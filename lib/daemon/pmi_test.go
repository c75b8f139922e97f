package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// The PMI service runs end to end in lib/master's tests (pmi_test.go,
// pmi_mpi_test.go); these cover its pure helpers.

func TestWithoutPMIEnv(t *testing.T) {
	in := []string{"PATH=/bin", "PMI_FD=9", "PMI_RANK=3", "PMI_SIZE=4", "PMI_PORT=h:1", "PMI_ID=7", "PMI_SPAWNED=1",
		"PMI_JOBID=x", "MPI_LOCALNRANKS=2", "MPI_LOCALRANKID=1", "PMI_DEBUG=1", "MPI_LOCALX=1", "HOME=/root"}
	got := withoutPMIEnv(in)
	want := []string{"PATH=/bin", "PMI_DEBUG=1", "MPI_LOCALX=1", "HOME=/root"}
	if !slices.Equal(got, want) {
		t.Errorf("withoutPMIEnv = %q, want %q", got, want)
	}
	if in[1] != "PMI_FD=9" {
		t.Error("withoutPMIEnv modified its input")
	}
}

func TestPlacementNodes(t *testing.T) {
	pl := []wire.Placement{
		{Node: "node0", Ranks: wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 2, Hi: 2}}},
		{Node: "node1", Ranks: wire.Span(1, 1)},
		{Node: "node2", Ranks: wire.Span(3, 4)},
	}
	if got := placementNodes(pl, 6); !slices.Equal(got, []int{0, 1, 0, 2, 2, -1}) {
		t.Errorf("placementNodes = %v", got)
	}
}

// TestPMIJobBarrier: the local barrier completes when the last live local
// rank enters, and a rank that leaves no longer holds it up; a flush that
// fails reaches every waiting rank.
func TestPMIJobBarrier(t *testing.T) {
	j := &pmiJob{ns: "j", live: map[uint32]bool{0: true, 1: true, 2: true}, kvs: map[string]string{}, pending: map[uint32][]wire.KV{}}
	j.put(1, "k", "v")
	if v, ok := j.get("k"); !ok || v != "v" {
		t.Fatalf("local put not visible: %q %v", v, ok)
	}
	j.mu.Lock()
	j.bar = &pmiBarrier{in: map[uint32]bool{0: true}, done: make(chan struct{})}
	b := j.bar
	if j.readyLocked() != nil {
		t.Error("barrier ready with 1 of 3 ranks in")
	}
	b.in[1] = true
	if j.readyLocked() != nil {
		t.Error("barrier ready with 2 of 3 ranks in")
	}
	delete(j.live, 2) // rank 2 exited
	flush := j.readyLocked()
	pending := len(j.pending)
	j.mu.Unlock()
	if flush == nil || j.bar != nil || pending != 0 {
		t.Fatalf("barrier not released after rank 2 left: flush %v, bar %v, pending %d", flush != nil, j.bar, pending)
	}
	// Complete it by hand (flush needs a master): waiters see the result.
	errc := make(chan error, 1)
	go func() {
		<-b.done
		errc <- b.err
	}()
	b.err = wire.Errorf(wire.ErrAborted, "rank 2 ended before entering")
	close(b.done)
	if err := <-errc; !errors.Is(err, wire.ErrAborted) {
		t.Errorf("waiter got %v", err)
	}
	// A rank cannot enter the same barrier twice.
	j.live[0] = true
	j.live[1] = true
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go func() { _ = j.fence(ctx, 0) }()
	time.Sleep(10 * time.Millisecond)
	if err := j.fence(ctx, 0); !errors.Is(err, wire.ErrState) {
		t.Errorf("second entry: %v", err)
	}
}

func TestPMIJobNodeAttr(t *testing.T) {
	j := &pmiJob{attrs: map[string]string{}, attrCh: make(chan struct{})}
	if _, ok, err := j.getAttr(context.Background(), "shm", false); ok || err != nil {
		t.Fatalf("missing attr: %v %v", ok, err)
	}
	got := make(chan string, 1)
	go func() {
		v, _, _ := j.getAttr(context.Background(), "shm", true)
		got <- v
	}()
	time.Sleep(10 * time.Millisecond)
	j.putAttr("other", "x")
	j.putAttr("shm", "/dev/shm/seg")
	select {
	case v := <-got:
		if v != "/dev/shm/seg" {
			t.Errorf("waited get = %q", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("get with wait never returned")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := j.getAttr(ctx, "never", true); !errors.Is(err, wire.ErrCanceled) {
		t.Errorf("canceled wait: %v", err)
	}
}

// TestPMIJobLocalBarrier: a barrier that every rank the job ever had
// enters on this node completes here (the daemon has no master in this
// test: a call would panic) and makes every value visible; wholeJob says
// no whenever a rank may be elsewhere or gone.
func TestPMIJobLocalBarrier(t *testing.T) {
	d := &Daemon{jobs: map[string]*jobCache{"j": {data: wire.JobData{Job: "j", Size: 2}, local: wire.Span(0, 1)}}}
	j := &pmiJob{svc: &pmiService{d: d}, ns: "j", live: map[uint32]bool{0: true, 1: true}, kvs: map[string]string{}, pending: map[uint32][]wire.KV{}}
	j.put(0, "a", "1")
	j.put(1, "b", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errc := make(chan error, 2)
	for r := range uint32(2) {
		go func() { errc <- j.fence(ctx, r) }()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatalf("fence: %v", err)
		}
	}
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if v, ok := j.get(k); !ok || v != want {
			t.Errorf("after the barrier %s = %q, %v; want %q", k, v, ok, want)
		}
	}

	tests := []struct {
		name  string
		size  uint32
		local wire.RankRanges
		n     int
		want  bool
	}{
		{"all here", 2, wire.Span(0, 1), 2, true},
		{"a rank elsewhere", 3, wire.Span(0, 1), 2, false},
		{"a rank ended", 3, wire.Span(0, 2), 2, false},
		{"no job data", 0, nil, 0, false},
	}
	for _, tt := range tests {
		d.jobs["j"] = &jobCache{data: wire.JobData{Job: "j", Size: tt.size}, local: tt.local}
		if got := j.wholeJob(tt.n); got != tt.want {
			t.Errorf("%s: wholeJob = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPMIPortServedOnce: in PMI_PORT mode a fast process may connect and
// bind its session before the daemon learns that the fork is done; the
// launch path must then leave the connection to the session that bound it
// (a second reader on it, and a second finish, crashed the daemon).
func TestPMIPortServedOnce(t *testing.T) {
	d := &Daemon{log: slog.New(slog.DiscardHandler)}
	svc := newPMIService(d)
	job := &pmiJob{svc: svc, ns: "j", spec: wire.PMIJob{Mode: wire.PMIPort}, live: map[uint32]bool{0: true}}
	ours, theirs := net.Pipe()
	defer theirs.Close()
	pp := &pmiProc{job: job, key: procKey{"j", 0}, ended: make(chan struct{})}
	pp.bound, pp.conn, pp.stop = true, ours, func() { ours.Close() } // what servePort's bind does
	pp.started(nil, nil)
	// Nobody but servePort (not running here) may read the connection.
	_ = theirs.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := theirs.Write([]byte("cmd=init pmi_version=1 pmi_subversion=1\n")); err == nil {
		t.Fatal("the launch path started a second PMI session on a bound PMI_PORT connection")
	}
	ours.Close()
}

// TestPMIDeadBeforeAttach: the master's list of dead ranks is kept with
// the job's cache entry, which exists from the launch's registration on,
// so ranks of this node that attach to PMI only afterwards (still being
// forked when a rank elsewhere died) read it too; a job this node does
// not run keeps nothing.
func TestPMIDeadBeforeAttach(t *testing.T) {
	d := &Daemon{jobs: map[string]*jobCache{}, live: map[procKey]*procEntry{}}
	d.pmi = newPMIService(d)
	d.mu.Lock()
	d.ensureJob("dvm.1", 1, "app")
	d.mu.Unlock()
	for _, b := range []*wire.PMIDead{{Job: "dvm.1", Ranks: []uint32{3}}, {Job: "dvm.1", Ranks: []uint32{3, 0}}, {Job: "dvm.9", Ranks: []uint32{1}}} {
		if _, err := d.handlePMIDead(context.Background(), nil, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ job, want string }{{"dvm.1", "3,0"}, {"dvm.9", ""}} {
		j := d.pmi.job(&wire.LaunchReq{Job: tc.job, Ranks: wire.Span(1, 2), PMI: &wire.PMIJob{KVS: "kvs_" + tc.job, KeepGoing: true}})
		pp := &pmiProc{job: j, key: procKey{tc.job, 1}}
		if got := pp.Dead(); got != tc.want {
			t.Errorf("%s: PMI_dead_processes = %q, want %q", tc.job, got, tc.want)
		}
	}
}
