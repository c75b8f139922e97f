package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// upDaemon returns a daemon connected to a fake master that records every
// gathered kv.fence and answers each part at once: with aborted for parts
// of node "bad", else with nothing.
func upDaemon(t *testing.T) (*Daemon, <-chan *wire.FenceReq) {
	t.Helper()
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *wire.FenceReq, 16)
	mux := wire.NewMux()
	wire.HandleTyped(mux, wire.KindFence, func(_ context.Context, _ *wire.Request, b *wire.FenceReq) (any, error) {
		got <- b
		rep := &wire.FenceReply{Parts: make([]wire.FencePartReply, len(b.Parts))}
		for i, p := range b.Parts {
			if p.Node == "bad" {
				rep.Parts[i].Err = &wire.Error{Code: wire.CodeAborted, Msg: "fake master: bad part"}
			}
		}
		return rep, nil
	})
	d.master = pipeMaster(t, mux)
	return d, got
}

func part(node string, extra bool) wire.FencePart {
	return wire.FencePart{Node: node, Local: wire.Span(0, 0), Extra: extra}
}

// gathered checks that the next request to the master holds parts of
// these nodes, in order.
func gathered(t *testing.T, got <-chan *wire.FenceReq, nodes ...string) {
	t.Helper()
	select {
	case b := <-got:
		var have []string
		for _, p := range b.Parts {
			have = append(have, p.Node)
		}
		if strings.Join(have, " ") != strings.Join(nodes, " ") || b.Job != "j" || b.ID != "f" {
			t.Fatalf("the master got parts of %v (job %q, fence %q), want %v of j, f", have, b.Job, b.ID, nodes)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("nothing reached the master; want parts of %v", nodes)
	}
}

func nothingGathered(t *testing.T, got <-chan *wire.FenceReq) {
	t.Helper()
	select {
	case b := <-got:
		t.Fatalf("the master got %d parts early", len(b.Parts))
	case <-time.After(50 * time.Millisecond):
	}
}

func answered(t *testing.T, ws ...*upResult) {
	t.Helper()
	for i, w := range ws {
		select {
		case <-w.done:
			if w.err != nil || w.rep.Err != nil {
				t.Fatalf("part %d: %v %v", i, w.err, w.rep.Err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("part %d not answered", i)
		}
	}
}

// TestGatherUp: a daemon heading a part of two nodes below it sends a
// fence's entries on once every node of its subtree has sent one (a scout
// will do), again once their whole entries are in, at once when a node's
// entry of the next instance comes, and after its wait otherwise; each
// part gets its own answer.
func TestGatherUp(t *testing.T) {
	d, got := upDaemon(t)
	d.up.wait = time.Hour
	d.setUpLink(&wire.NodeRelay{Job: "j", Below: []wire.RelayHop{{Node: "n1"}, {Node: "n2"}}}, nil)
	key := fenceKey{job: "j", id: "f"}
	gather := func(p wire.FencePart) *upResult {
		w := &upResult{done: make(chan struct{})}
		d.gatherUp(key, nil, p, w)
		return w
	}

	a, b := gather(part("n1", false)), gather(part("n0", true))
	nothingGathered(t, got)
	c := gather(part("n2", false)) // every node seen: what is held goes
	gathered(t, got, "n1", "n0", "n2")
	answered(t, a, b, c)
	e := gather(part("n0", false)) // every node's whole entry in
	gathered(t, got, "n0")
	answered(t, e)

	// n1's next instance while the previous one is held: that goes
	// alone, and since only n1 came, the next instances are expected to
	// hold only n1 too, until the job's tree changes.
	a = gather(part("n1", false))
	b = gather(part("n1", false))
	gathered(t, got, "n1")
	gathered(t, got, "n1")
	answered(t, a, b)
	a = gather(part("n1", false))
	gathered(t, got, "n1")
	answered(t, a)
	d.setUpLink(&wire.NodeRelay{Job: "j", Below: []wire.RelayHop{{Node: "n1"}, {Node: "n2"}}}, nil)
	a, c, e = gather(part("n2", false)), gather(part("n1", false)), gather(part("n0", false))
	gathered(t, got, "n2", "n1", "n0")
	answered(t, a, c, e)

	// A subtree that never completes goes after the wait.
	d.up.wait = 20 * time.Millisecond
	a, c = gather(part("n1", false)), gather(part("bad", false))
	gathered(t, got, "n1", "bad")
	answered(t, a)
	<-c.done
	if c.rep.Err == nil || c.rep.Err.Code != wire.CodeAborted {
		t.Fatalf("the bad part: %+v %v, want its own aborted", c.rep, c.err)
	}
}

// TestGatherUpParentUnreachable: entries whose parent daemon cannot be
// reached fail as aborted, naming the parent's node; they are not sent to
// the master behind its back (the parent may have entered them), but the
// job's later fences go to the master directly.
func TestGatherUpParentUnreachable(t *testing.T) {
	d, got := upDaemon(t)
	d.up.links = map[string]upLink{"j": {addr: "unix:" + t.TempDir() + "/gone.sock", node: "n9"}}
	w := &upResult{done: make(chan struct{})}
	d.gatherUp(fenceKey{job: "j", id: "f"}, nil, part("n0", false), w)
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	if !errors.Is(w.err, wire.ErrAborted) || !strings.Contains(w.err.Error(), "node n9") {
		t.Fatalf("got %v, want aborted naming node n9", w.err)
	}
	nothingGathered(t, got)
	// The job's next entries go to the master directly, not to the lost
	// parent, until a relay shows the tree again.
	if d.fenceUpward(&wire.FenceReq{Job: "j", Local: wire.Span(0, 0)}) {
		t.Fatal("after its parent failed, the daemon still sends the job's fence entries up the tree")
	}
	d.setUpLink(&wire.NodeRelay{Job: "j", Below: []wire.RelayHop{{Node: "n1"}}}, nil)
	if !d.fenceUpward(&wire.FenceReq{Job: "j", Local: wire.Span(0, 0)}) {
		t.Fatal("a relay of the job did not put the daemon back in its tree")
	}
}

// TestFenceUpBadInput: a daemon refuses gathered entries without parts,
// without a job, or with a participant list the master would refuse,
// naming what is wrong; nothing is held for them.
func TestFenceUpBadInput(t *testing.T) {
	d, got := upDaemon(t)
	for _, b := range []*wire.FenceReq{
		{Job: "j", ID: "f"},
		{ID: "f", Parts: []wire.FencePart{part("n1", false)}},
		{Job: "j", ID: "f", Procs: []wire.ProcRanges{{Ranks: wire.RankRanges{{Lo: 5, Hi: 2}}}}, Parts: []wire.FencePart{part("n1", false)}},
	} {
		_, err := d.handleFenceUp(context.Background(), nil, b)
		if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "parts of a fence") {
			t.Errorf("%+v: %v, want invalid naming what a gathered request carries", b, err)
		}
	}
	nothingGathered(t, got)
	d.up.mu.Lock()
	defer d.up.mu.Unlock()
	if len(d.up.batches) != 0 {
		t.Errorf("%d batches held after refusals", len(d.up.batches))
	}
}

// TestFenceUpTwoRounds: while an entry of one round of a fence is on its
// way up the tree, an entry of another round of the same fence (a process
// that entered it twice at once) goes to the master on its own: a request
// up the tree must not hold two instances of one fence, since the master
// answers it once all its parts are decided and the later instance may
// wait for a process whose earlier answer the request holds.
func TestFenceUpTwoRounds(t *testing.T) {
	d, err := newDaemon(Config{Node: "n0", Master: "/nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	kinds := make(chan string, 4)
	mux := wire.NewMux()
	wire.HandleTyped(mux, wire.KindFence, func(_ context.Context, _ *wire.Request, b *wire.FenceReq) (any, error) {
		if len(b.Parts) == 0 {
			kinds <- "direct"
			return &wire.FenceReply{}, nil
		}
		kinds <- "up"
		<-release
		return &wire.FenceReply{Parts: make([]wire.FencePartReply, len(b.Parts))}, nil
	})
	d.master = pipeMaster(t, mux)
	d.setUpLink(&wire.NodeRelay{Job: "j"}, nil) // heads a part of its own: sends up at once
	d.up.links["j"] = upLink{below: 1}
	body := func() *wire.FenceReq { return &wire.FenceReq{Job: "j", ID: "f", Local: wire.Span(0, 0)} }
	r1, r2 := &fenceRound{}, &fenceRound{}
	first := make(chan error, 1)
	go func() { first <- d.callFence(body(), &wire.FenceReply{}, false, r1) }()
	if k := <-kinds; k != "up" {
		t.Fatalf("the first round's entry went %s, want up", k)
	}
	second := make(chan error, 1)
	go func() { second <- d.callFence(body(), &wire.FenceReply{}, false, r2) }()
	select {
	case k := <-kinds:
		if k != "direct" {
			close(release) // let the master answer both before the test ends
			t.Fatalf("the second round's entry went %s while the first was on its way up, want direct", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second round's entry reached nobody")
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := d.callFence(body(), &wire.FenceReply{}, false, r2); err != nil {
		t.Fatal(err)
	}
	if k := <-kinds; k != "up" {
		t.Fatalf("once the first round was answered, the next entry went %s, want up", k)
	}
}
