package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fenceMaster stands in for the master's kv.fence over one instance at a
// time: an entry waits until the entered ranks cover want (then all get
// the collected data plus that of remote rank 7), until its TimeoutMS
// (taken back: ErrTimeout), or until fail. Entries holding a rank of
// refuse are refused (ErrInvalid). Every entry is recorded in bodies.
type fenceMaster struct {
	bodies chan *wire.FenceReq

	mu      sync.Mutex
	want    wire.RankRanges
	refuse  wire.RankRanges
	failed  error // set by fail: later entries get it too
	stored  bool  // answer with Stored and no data, as after kv.fenced down the tree
	waiting map[*wire.FenceReq]chan fenceAnswer
}

type fenceAnswer struct {
	rep *wire.FenceReply
	err error
}

func (f *fenceMaster) handle(b *wire.FenceReq) (*wire.FenceReply, error) {
	f.bodies <- b
	f.mu.Lock()
	for r := range b.Local.All() {
		if f.refuse.Contains(r) {
			f.mu.Unlock()
			return nil, wire.Errorf(wire.ErrInvalid, "fake master: j/%d is not among the participants", r)
		}
	}
	if f.failed != nil {
		f.mu.Unlock()
		return nil, f.failed
	}
	ch := make(chan fenceAnswer, 1)
	f.waiting[b] = ch
	var in wire.RankRanges
	var data []wire.ProcKV
	for w := range f.waiting {
		for r := range w.Local.All() {
			in = in.Add(r)
		}
		data = append(data, w.Data...)
	}
	if in.String() == f.want.String() {
		data = append(data, wire.ProcKV{Job: "j", Rank: 7, Data: []wire.KV{{Key: "k", Value: []byte("remote")}}})
		for w, c := range f.waiting {
			if f.stored {
				c <- fenceAnswer{&wire.FenceReply{Stored: true}, nil}
			} else {
				c <- fenceAnswer{&wire.FenceReply{Data: data}, nil}
			}
			delete(f.waiting, w)
		}
	}
	f.mu.Unlock()
	var timer <-chan time.Time
	if b.TimeoutMS > 0 {
		timer = time.After(time.Duration(b.TimeoutMS) * time.Millisecond)
	}
	select {
	case a := <-ch:
		return a.rep, a.err
	case <-timer:
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.waiting[b]; !ok { // decided meanwhile
			a := <-ch
			return a.rep, a.err
		}
		delete(f.waiting, b)
		return nil, wire.Errorf(wire.ErrTimeout, "fake master: fence of j/%d: timed out", b.Local[0].Lo)
	}
}

func (f *fenceMaster) setWant(rr wire.RankRanges) {
	f.mu.Lock()
	f.want = rr
	f.mu.Unlock()
}

// fail fails the waiting entries and every later one with err.
func (f *fenceMaster) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = err
	for w, c := range f.waiting {
		c <- fenceAnswer{nil, err}
		delete(f.waiting, w)
	}
}

// fenceDaemon returns a daemon whose node runs ranks 0..n-1 of job "j"
// (all alive), connected to a fenceMaster whose fence is over want.
func fenceDaemon(t *testing.T, n uint32, want wire.RankRanges) (*Daemon, *fenceMaster) {
	t.Helper()
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	d.jobs["j"] = &jobCache{data: wire.JobData{Job: "j", ID: 1}, local: wire.Span(0, n-1)}
	for r := range n {
		d.live[procKey{"j", r}] = &procEntry{}
	}
	f := &fenceMaster{bodies: make(chan *wire.FenceReq, 100), want: want, waiting: map[*wire.FenceReq]chan fenceAnswer{}}
	mux := wire.NewMux()
	wire.HandleTyped(mux, wire.KindFence, func(_ context.Context, _ *wire.Request, b *wire.FenceReq) (any, error) {
		return f.handle(b)
	})
	d.master = pipeMaster(t, mux)
	return d, f
}

// pipeMaster returns a daemon's connection to a fake master served by mux.
func pipeMaster(t *testing.T, mux *wire.Mux) *wire.Conn {
	t.Helper()
	a, b := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv := make(chan error, 1)
	go func() {
		c, err := wire.Accept(ctx, b, wire.AcceptPolicy{Open: true}, wire.Options{Handler: mux.Serve})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		srv <- err
	}()
	mc, err := wire.Client(ctx, a, wire.Hello{Role: wire.RoleDaemon, Name: "n0"}, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-srv; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mc.Close() })
	return mc
}

// next returns the next entry the daemon sent.
func (f *fenceMaster) next(t *testing.T) *wire.FenceReq {
	t.Helper()
	select {
	case b := <-f.bodies:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no kv.fence reached the master")
		return nil
	}
}

// sent checks that the next entry the daemon sent is for ranks.
func (f *fenceMaster) sent(t *testing.T, ranks string) *wire.FenceReq {
	t.Helper()
	b := f.next(t)
	if b.Local.String() != ranks {
		t.Fatalf("the daemon sent an entry for %s, want %s", b.Local, ranks)
	}
	return b
}

// none checks that the daemon sent nothing for a while.
func (f *fenceMaster) none(t *testing.T) {
	t.Helper()
	select {
	case b := <-f.bodies:
		t.Fatalf("unexpected kv.fence for %s", b.Local)
	case <-time.After(50 * time.Millisecond):
	}
}

// enter calls kv.fence as a client; the result arrives on the channel.
func enter(c *wire.Conn, req wire.FenceReq) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.Call(context.Background(), wire.KindFence, &req, nil) }()
	return ch
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("a fence did not return")
		return nil
	}
}

// pending checks that a fence has not returned yet.
func pending(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early: %v", what, err)
	default:
	}
}

// TestFenceAggregate: the first process of the node goes ahead, the
// others reach the master as one entry with their data, and the
// collected data of the others lands in the cache.
func TestFenceAggregate(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 2))
	cs := []*wire.Conn{clientOf(t, d, "j", 0), clientOf(t, d, "j", 1), clientOf(t, d, "j", 2)}
	ctx := context.Background()
	for _, r := range []int{0, 2} {
		if err := cs[r].Call(ctx, wire.KindKVCommit, &wire.KVCommitReq{Data: []wire.KV{{Key: "k", Value: []byte{byte(r)}}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	req := wire.FenceReq{ID: "x", Collect: true}
	res := []<-chan error{enter(cs[0], req)}
	if b := f.sent(t, "0"); b.Job != "j" || b.ID != "x" || !b.Collect || len(b.Data) != 1 || b.Data[0].Rank != 0 {
		t.Errorf("scout %+v", b)
	}
	res = append(res, enter(cs[1], req))
	f.none(t) // held until the whole node is in
	res = append(res, enter(cs[2], req))
	if b := f.sent(t, "1-2"); !b.Collect || len(b.Data) != 1 || b.Data[0].Rank != 2 {
		t.Errorf("the node's entry %+v", b)
	}
	for r, ch := range res {
		if err := waitErr(t, ch); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	var rep wire.KVGetReply
	if err := cs[0].Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: 7, Key: "k"}, &rep); err != nil || string(rep.Value) != "remote" {
		t.Errorf("collected data of rank 7: %q %v", rep.Value, err)
	}
	f.none(t)

	// Lists the master treats as the same fence are one round here too,
	// and a fence over ranks 0 and 1 does not wait for rank 2.
	f.setWant(wire.Span(0, 1))
	res = []<-chan error{enter(cs[0], wire.FenceReq{Procs: []wire.ProcRanges{{Ranks: wire.Span(0, 1)}}})}
	f.sent(t, "0")
	res = append(res, enter(cs[1], wire.FenceReq{Procs: []wire.ProcRanges{{Ranks: wire.Span(1, 1)}, {Job: "j", Ranks: wire.Span(0, 0)}}}))
	f.sent(t, "1")
	for r, ch := range res {
		if err := waitErr(t, ch); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestFenceParticipantEndsFirst: a local participant that ends without
// entering no longer holds the others back; the master's verdict reaches
// them all. One that ended before the fence began is not waited for.
func TestFenceParticipantEndsFirst(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 2))
	r0 := enter(clientOf(t, d, "j", 0), wire.FenceReq{})
	f.sent(t, "0")
	r1 := enter(clientOf(t, d, "j", 1), wire.FenceReq{})
	f.none(t)
	d.mu.Lock()
	delete(d.live, procKey{"j", 2})
	d.mu.Unlock()
	f.fail(wire.Errorf(wire.ErrAborted, "fake master: fence: j/2 has ended before entering"))
	d.fenceProcEnded(procKey{"j", 2})
	for _, ch := range []<-chan error{r0, r1} {
		if err := waitErr(t, ch); !errors.Is(err, wire.ErrAborted) {
			t.Errorf("fence with an ended participant: %v", err)
		}
	}
	// Rank 1 failed with the scout, or was sent after rank 2's end.
	select {
	case b := <-f.bodies:
		if b.Local.String() != "1" {
			t.Errorf("sent for %s", b.Local)
		}
	default:
	}

	d2, f2 := fenceDaemon(t, 3, wire.Span(0, 1))
	d2.mu.Lock()
	delete(d2.live, procKey{"j", 2})
	d2.mu.Unlock()
	r0 = enter(clientOf(t, d2, "j", 0), wire.FenceReq{})
	f2.sent(t, "0")
	r1 = enter(clientOf(t, d2, "j", 1), wire.FenceReq{})
	f2.sent(t, "1")
	for _, ch := range []<-chan error{r0, r1} {
		if err := waitErr(t, ch); err != nil {
			t.Error(err)
		}
	}
}

// TestFenceFailedElsewhere: when the master fails the instance (a
// participant on another node ended, a resource change was aborted), the
// entries held here fail with it instead of waiting for the node's
// participants that have not entered.
func TestFenceFailedElsewhere(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 3))
	r0 := enter(clientOf(t, d, "j", 0), wire.FenceReq{ID: "mpi://rte/x/rc/1:accept:s"})
	f.sent(t, "0")
	r1 := enter(clientOf(t, d, "j", 1), wire.FenceReq{ID: "mpi://rte/x/rc/1:accept:s"})
	f.none(t)
	f.fail(wire.Errorf(wire.ErrAborted, "fake master: the change was aborted"))
	for r, ch := range []<-chan error{r0, r1} {
		if err := waitErr(t, ch); !errors.Is(err, wire.ErrAborted) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	f.none(t)
}

// TestFenceTimeout: an entry that times out before it is sent is taken
// back here; one that times out at the master takes its entry back
// there, and the others wait on.
func TestFenceTimeout(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 2))
	c0, c1, c2 := clientOf(t, d, "j", 0), clientOf(t, d, "j", 1), clientOf(t, d, "j", 2)

	// Held here: rank 2 never comes.
	r0 := enter(c0, wire.FenceReq{})
	f.sent(t, "0")
	if err := waitErr(t, enter(c1, wire.FenceReq{TimeoutMS: 30})); !errors.Is(err, wire.ErrTimeout) {
		t.Fatalf("rank 1: %v", err)
	}
	f.none(t)
	pending(t, "rank 0", r0)
	// Taken back: rank 1's next entry joins the same instance.
	r1, r2 := enter(c1, wire.FenceReq{}), enter(c2, wire.FenceReq{})
	if b := f.sent(t, "1-2"); b.TimeoutMS != 0 {
		t.Errorf("sent %+v", b)
	}
	for _, ch := range []<-chan error{r0, r1, r2} {
		if err := waitErr(t, ch); err != nil {
			t.Error(err)
		}
	}

	// At the master: rank 2's time runs out there, rank 1 waits for it
	// (and for rank 3 on another node).
	f.setWant(wire.Span(0, 3))
	r0 = enter(c0, wire.FenceReq{})
	f.sent(t, "0")
	r1 = enter(c1, wire.FenceReq{})
	r2 = enter(c2, wire.FenceReq{TimeoutMS: 60})
	if b := f.sent(t, "1-2"); b.TimeoutMS <= 0 || b.TimeoutMS > 60 {
		t.Errorf("sent %+v", b)
	}
	if err := waitErr(t, r2); !errors.Is(err, wire.ErrTimeout) {
		t.Errorf("rank 2 timed out at the master: %v", err)
	}
	f.none(t)
	pending(t, "rank 1", r1)
	r2 = enter(c2, wire.FenceReq{})
	if b := f.sent(t, "1-2"); b.TimeoutMS != 0 {
		t.Errorf("sent again %+v", b)
	}
	go func() { _, _ = f.handle(&wire.FenceReq{Local: wire.Span(3, 3), Job: "j"}) }()
	f.sent(t, "3")
	for _, ch := range []<-chan error{r0, r1, r2} {
		if err := waitErr(t, ch); err != nil {
			t.Error(err)
		}
	}

	// The scout's time runs out at the master: a held entry goes ahead.
	f.setWant(wire.Span(0, 2))
	r0 = enter(c0, wire.FenceReq{TimeoutMS: 30})
	f.sent(t, "0")
	r1 = enter(c1, wire.FenceReq{})
	if err := waitErr(t, r0); !errors.Is(err, wire.ErrTimeout) {
		t.Errorf("scout: %v", err)
	}
	f.sent(t, "1")
	r0, r2 = enter(c0, wire.FenceReq{}), enter(c2, wire.FenceReq{})
	f.sent(t, "0,2")
	for _, ch := range []<-chan error{r0, r1, r2} {
		if err := waitErr(t, ch); err != nil {
			t.Error(err)
		}
	}
}

// TestFenceRefused: an entry the master refuses as invalid is split, so
// that only the process that is no participant fails.
func TestFenceRefused(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 1))
	f.refuse = wire.Span(2, 2)
	var res []<-chan error
	for r := range uint32(3) {
		res = append(res, enter(clientOf(t, d, "j", r), wire.FenceReq{ID: "y"}))
		if r == 0 {
			f.sent(t, "0")
		}
	}
	seen := map[string]bool{}
	for range 3 {
		seen[f.next(t).Local.String()] = true
	}
	if !seen["1-2"] || !seen["1"] || !seen["2"] {
		t.Errorf("sent %v", seen)
	}
	for r, ch := range res {
		err := waitErr(t, ch)
		if r == 2 && !errors.Is(err, wire.ErrInvalid) || r != 2 && err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestFenceClientGone: a process whose connection closes after it entered
// stays entered (as at the master), so the others complete.
func TestFenceClientGone(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 2))
	r0 := enter(clientOf(t, d, "j", 0), wire.FenceReq{})
	f.sent(t, "0")
	c1 := clientOf(t, d, "j", 1)
	r1 := enter(c1, wire.FenceReq{})
	f.none(t)
	c1.Close()
	if err := waitErr(t, r1); err == nil {
		t.Error("call on a closed connection succeeded")
	}
	r2 := enter(clientOf(t, d, "j", 2), wire.FenceReq{})
	f.sent(t, "1-2")
	for _, ch := range []<-chan error{r0, r2} {
		if err := waitErr(t, ch); err != nil {
			t.Error(err)
		}
	}
}

// TestFenceLate: a process the node did not expect (it started after the
// node's first entry) goes to the master on its own, and its next fence
// is the node's next round.
func TestFenceLate(t *testing.T) {
	d, f := fenceDaemon(t, 3, wire.Span(0, 2))
	d.mu.Lock()
	delete(d.live, procKey{"j", 2}) // not started yet
	d.mu.Unlock()
	cs := []*wire.Conn{clientOf(t, d, "j", 0), clientOf(t, d, "j", 1), clientOf(t, d, "j", 2)}
	res := []<-chan error{enter(cs[0], wire.FenceReq{})}
	f.sent(t, "0")
	res = append(res, enter(cs[1], wire.FenceReq{}))
	f.sent(t, "1")
	d.mu.Lock()
	d.live[procKey{"j", 2}] = &procEntry{}
	d.mu.Unlock()
	res = append(res, enter(cs[2], wire.FenceReq{}))
	f.sent(t, "2")
	for r, ch := range res {
		if err := waitErr(t, ch); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// Rank 2 first this time: the next round expects it.
	res = []<-chan error{enter(cs[2], wire.FenceReq{})}
	f.sent(t, "2")
	res = append(res, enter(cs[0], wire.FenceReq{}))
	f.none(t)
	res = append(res, enter(cs[1], wire.FenceReq{}))
	f.sent(t, "0-1")
	for r, ch := range res {
		if err := waitErr(t, ch); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestFenceSpec(t *testing.T) {
	for _, tc := range []struct {
		procs []wire.ProcRanges
		want  string
	}{
		{nil, "j=*"},
		{[]wire.ProcRanges{{Job: "j"}}, "j=*"},
		{[]wire.ProcRanges{{Ranks: wire.Span(2, 3)}, {Job: "j", Ranks: wire.Span(0, 1)}}, "j=0-3"},
		{[]wire.ProcRanges{{Ranks: wire.Span(0, 1)}, {Job: "k"}, {Job: "j"}}, "j=*;k=*"},
		{[]wire.ProcRanges{{Job: "k", Ranks: wire.Span(5, 5)}, {Ranks: wire.Span(1, 1)}}, "j=1;k=5"},
	} {
		if got, ok := fenceSpec("j", tc.procs); !ok || got != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.procs, got, ok, tc.want)
		}
	}
}

// TestFencedOnce: a fence's data sent down the tree (kv.fenced) lands in
// the store of remote data, and a late copy of an instance (the master's
// direct resend came first, a later fence replaced the data since) is not
// applied again.
func TestFencedOnce(t *testing.T) {
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSessionState(d)
	data := func(v string) []wire.ProcKV {
		return []wire.ProcKV{{Job: "j", Rank: 7, Data: []wire.KV{{Key: "k", Value: []byte(v)}}}}
	}
	remote := func() string { // as a get reads it
		s.mu.Lock()
		defer s.mu.Unlock()
		s.unreadLocked()
		return string(s.remote[procKey{"j", 7}]["k"])
	}
	for _, step := range []struct {
		inst uint64
		v    string
		want string
	}{
		{1, "first", "first"},
		{2, "second", "second"},
		{1, "first", "second"}, // the late copy of instance 1
		{3, "third", "third"},
	} {
		if _, err := s.handleFenced(context.Background(), fencedReq(t, &wire.FenceData{Inst: step.inst, Job: "j", Data: data(step.v)})); err != nil {
			t.Fatal(err)
		}
		if got := remote(); got != step.want {
			t.Fatalf("after kv.fenced %d (%q): rank 7's k = %q, want %q", step.inst, step.v, got, step.want)
		}
	}
	// The memory of applied instances is bounded.
	for i := range uint64(3 * fencedKeep) {
		if _, err := s.handleFenced(context.Background(), fencedReq(t, &wire.FenceData{Inst: 10 + i, Job: "j", Data: data("x")})); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.fencedInsts); n != fencedKeep {
		t.Errorf("%d instances remembered, want at most %d", n, fencedKeep)
	}
	if _, err := s.handleFenced(context.Background(), fencedReq(t, &wire.FenceData{Job: "j"})); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("kv.fenced without an instance number: %v, want invalid", err)
	}
}

// TestFenceStoredAnswer: an answer that says the data is stored (it came
// down the tree) does not replace what kv.fenced put in the store, and the
// daemon's entries ask for that form.
func TestFenceStoredAnswer(t *testing.T) {
	d, f := fenceDaemon(t, 1, wire.Span(0, 0))
	s := newSessionState(d)
	d.sess = s
	if _, err := s.handleFenced(context.Background(), fencedReq(t, &wire.FenceData{Inst: 1, Job: "j",
		Data: []wire.ProcKV{{Job: "j", Rank: 7, Data: []wire.KV{{Key: "k", Value: []byte("tree")}}}}})); err != nil {
		t.Fatal(err)
	}
	f.stored = true
	done := make(chan error, 1)
	go func() {
		done <- s.fence(context.Background(), Caller{Job: "j", Rank: 0}, &wire.FenceReq{Collect: true})
	}()
	if b := f.sent(t, "0"); !b.Stored || !b.Collect {
		t.Errorf("the daemon's entry %+v does not offer to keep the data itself", b)
	}
	if err := waitErr(t, done); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.unreadLocked()
	got := string(s.remote[procKey{"j", 7}]["k"])
	s.mu.Unlock()
	if got != "tree" {
		t.Errorf("rank 7's k = %q after a stored answer, want the data from kv.fenced", got)
	}
}

// fencedReq is a kv.fenced request as the master sends it.
func fencedReq(t *testing.T, b *wire.FenceData) *wire.Request {
	t.Helper()
	raw, err := wire.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return &wire.Request{Kind: wire.KindFenced, Body: raw}
}

// TestFencedDecodedWhenRead: kv.fenced's data stays encoded until a get
// needs it, and stands then where it would have had it been applied on
// arrival: after what came before it, before what came after. A fence over
// all of the job drops it unread.
func TestFencedDecodedWhenRead(t *testing.T) {
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSessionState(d)
	kv := func(rank uint32, v string) wire.ProcKV {
		return wire.ProcKV{Job: "j", Rank: rank, Data: []wire.KV{{Key: "k", Value: []byte(v)}}}
	}
	get := func(rank uint32) string {
		rep, err := s.getRemote(context.Background(), procKey{"j", rank}, &wire.KVGetReq{Key: "k"})
		if err != nil {
			return "error: " + err.Error()
		}
		return string(rep.(*wire.KVGetReply).Value)
	}
	if _, err := s.handleFenced(context.Background(), fencedReq(t, &wire.FenceData{Inst: 1, Job: "j", Data: []wire.ProcKV{kv(7, "a"), kv(8, "a")}})); err != nil {
		t.Fatal(err)
	}
	if len(s.unread) != 1 || len(s.remote) != 0 {
		t.Fatalf("after kv.fenced: %d unread, %d decoded; want the data kept encoded", len(s.unread), len(s.remote))
	}
	// A fence over rank 8 only, with its new data: rank 7 keeps the first.
	s.fenced("j", []wire.ProcRanges{{Ranks: wire.Span(8, 8)}}, true, []wire.ProcKV{kv(8, "b")})
	if got := get(7) + get(8); got != "ab" {
		t.Errorf("ranks 7 and 8 read %q, want \"ab\"", got)
	}
	// Unread data of job j alone, then a fence over all of j: dropped
	// without being decoded (this one could not be).
	s.mu.Lock()
	s.unread = append(s.unread, unreadData{job: "j", onlyJob: true, raw: []byte{0xc1}})
	s.mu.Unlock()
	s.fenced("j", nil, true, []wire.ProcKV{kv(7, "c")})
	if len(s.unread) != 0 {
		t.Errorf("%d unread after a fence over the whole job", len(s.unread))
	}
	if got := get(7); got != "c" {
		t.Errorf("rank 7 reads %q after the fence over the job, want \"c\"", got)
	}
}

// TestFencedWholeJobByName: a fence whose list names a job without ranks
// (every live process of it) makes what is cached of that job's processes
// stale, as a fence with no list does for the caller's job; other jobs'
// entries stay.
func TestFencedWholeJobByName(t *testing.T) {
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	s := newSessionState(d)
	for _, k := range []procKey{{"j", 7}, {"j", 8}, {"other", 1}} {
		s.remote[k] = map[string][]byte{"k": []byte("old")}
	}
	s.fenced("caller", []wire.ProcRanges{{Job: "j"}}, false, nil)
	if _, ok := s.remote[procKey{"j", 7}]; ok {
		t.Error("j/7's cached data survived a fence over all of job j")
	}
	if _, ok := s.remote[procKey{"j", 8}]; ok {
		t.Error("j/8's cached data survived a fence over all of job j")
	}
	if _, ok := s.remote[procKey{"other", 1}]; !ok {
		t.Error("a fence over job j dropped another job's data")
	}
}

// TestDropJobUnread: when a job ends, the collected data of that job alone
// that no process read is dropped without being decoded (this one could
// not be: decoding it would log a warning), while another job's unread
// data stays and is read as before.
func TestDropJobUnread(t *testing.T) {
	var logs bytes.Buffer
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s := newSessionState(d)
	d.sess = s
	if _, err := s.handleFenced(context.Background(), fencedReq(t, &wire.FenceData{Inst: 1, Job: "k", Data: []wire.ProcKV{{Job: "k", Rank: 3, Data: []wire.KV{{Key: "x", Value: []byte("v")}}}}})); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.unread = append(s.unread, unreadData{job: "j", onlyJob: true, raw: []byte{0xc1}})
	s.mu.Unlock()
	d.dropSessionJob("j")
	if strings.Contains(logs.String(), "cannot be decoded") {
		t.Errorf("the ended job's unread data was decoded: %s", logs.String())
	}
	rep, err := s.getRemote(context.Background(), procKey{"k", 3}, &wire.KVGetReq{Key: "x"})
	if err != nil || string(rep.(*wire.KVGetReply).Value) != "v" {
		t.Errorf("job k's data after job j ended: %v %v, want v", rep, err)
	}
}
