package daemon

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/wire"
)

// TestRelayAppliesOnce: a daemon applies each relay number once, whether
// it comes down the tree or from the master again; a late copy of an
// earlier number is ignored; number 0 (pings) is applied every time; a
// relay for another daemon of the node is not applied and is reported as
// not reached; only cache updates can be relayed.
func TestRelayAppliesOnce(t *testing.T) {
	d, err := newDaemon(Config{Node: "n", Master: "unix:/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	d.relay.id = 42
	raw, err := wire.Marshal(&wire.Ping{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	relay := func(seq, to uint64) (applied bool, rep *wire.NodeRelayReply) {
		t.Helper()
		d.lastPing.Store(0)
		out, err := d.handleRelay(ctx, nil, &wire.NodeRelay{Seq: seq, To: to, Kind: wire.KindPing, Body: raw})
		if err != nil {
			t.Fatalf("relay %d to %d: %v", seq, to, err)
		}
		return d.lastPing.Load() != 0, out.(*wire.NodeRelayReply)
	}
	for _, step := range []struct {
		seq, to uint64
		applied bool
	}{
		{5, 42, true},
		{5, 42, false}, // the master's resend after the tree's copy
		{3, 0, false},  // a late copy of an earlier relay
		{6, 0, true},
		{0, 42, true}, // pings carry no number
		{0, 42, true},
	} {
		if got, rep := relay(step.seq, step.to); got != step.applied || len(rep.Failed) != 0 {
			t.Errorf("relay %d to %d: applied %v (%+v), want %v", step.seq, step.to, got, rep.Failed, step.applied)
		}
	}
	got, rep := relay(7, 41)
	if got || len(rep.Failed) != 1 || !rep.Failed[0].Unreached || rep.Failed[0].Node != "n" {
		t.Errorf("relay for another daemon of the node: applied %v, %+v; want not applied, reported not reached", got, rep.Failed)
	}
	if got, _ := relay(7, 42); !got {
		t.Error("relay 7 for this daemon, after one for another daemon: not applied")
	}
	_, err = d.handleRelay(ctx, nil, &wire.NodeRelay{Seq: 8, Kind: wire.KindNodeStop})
	if wire.CodeOf(err) != wire.CodeInvalid {
		t.Errorf("relayed node.stop: %v, want invalid", err)
	}
}

// TestRelayUnreachable: a part whose head cannot be dialed is reported as
// not reached, head and subtree, well within the relay's wait.
func TestRelayUnreachable(t *testing.T) {
	d, err := newDaemon(Config{Node: "n", Master: "unix:/nonexistent", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := wire.Marshal(&wire.Ping{Seq: 1})
	below := []wire.RelayHop{{Node: "a", Addr: "unix:" + t.TempDir() + "/none.sock"}, {Node: "b", Addr: "unix:/x"}, {Node: "c", Addr: "bogus"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := d.handleRelay(ctx, nil, &wire.NodeRelay{Kind: wire.KindPing, Body: raw, Radix: 2, Below: below, WaitMS: 5000})
	if err != nil {
		t.Fatal(err)
	}
	// Parts: [a b] (b below a) and [c].
	failed := map[string]bool{}
	for _, f := range out.(*wire.NodeRelayReply).Failed {
		failed[f.Node] = f.Unreached
	}
	if len(failed) != 3 || !failed["a"] || !failed["b"] || !failed["c"] {
		t.Errorf("failures %v, want a, b and c not reached", failed)
	}
	d.closePeers()
}

// TestRelayLaunch: a launch that says "the ranks the data places here"
// (Mine) starts this node's ranks of the data; relayed, its answer lists
// what started, and the master's resend of the same relay number starts
// nothing more and answers the same. Mine with ranks, or without the
// whole job data, is refused.
func TestRelayLaunch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	if err := dvmdir.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	f, sock := startFakeMaster(t, dir)
	runErr := make(chan error, 1)
	go func() {
		runErr <- Run(context.Background(), Config{Master: sock, Node: "n1", Slots: 4, DVM: "dvm1", Dir: dir, KillGrace: 200 * time.Millisecond})
	}()
	var mc *wire.Conn
	select {
	case mc = <-f.conn:
	case err := <-runErr:
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	data := &wire.JobData{Gen: 1, ID: 1, Job: "dvm1.1", App: "a", Size: 4, NextRank: 4,
		Placement: []wire.Placement{{Node: "n0", Ranks: wire.Span(0, 1)}, {Node: "n1", Ranks: wire.Span(2, 3)}}}
	body := &wire.LaunchReq{Job: "dvm1.1", App: "a", ID: 1, Argv: []string{"sleep", "30"}, Data: data, Mine: true}
	raw, err := wire.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	relay := &wire.NodeRelay{Seq: 7, Kind: wire.KindNodeLaunch, Body: raw}
	var first, again wire.NodeRelayReply
	if err := mc.Call(ctx, wire.KindNodeRelay, relay, &first); err != nil {
		t.Fatal(err)
	}
	ranks := func(rep wire.NodeRelayReply) (rr []uint32) {
		for _, s := range rep.Started {
			if s.PID <= 0 || s.Node != "n1" || s.Job != "dvm1.1" {
				t.Errorf("started %+v", s)
			}
			rr = append(rr, s.Rank)
		}
		return rr
	}
	if got := ranks(first); len(first.Failed) != 0 || !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("relayed launch: started %v, failed %+v; want ranks 2 and 3 (n1's), none failed", got, first.Failed)
	}
	if err := mc.Call(ctx, wire.KindNodeRelay, relay, &again); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ranks(again), ranks(first)) || again.Started[0].PID != first.Started[0].PID {
		t.Errorf("resent launch: started %+v, want the first answer %+v", again.Started, first.Started)
	}
	var kr wire.KillReply
	if err := mc.Call(ctx, wire.KindNodeKill, &wire.KillReq{Job: "dvm1.1"}, &kr); err != nil || kr.N != 2 {
		t.Errorf("kill after a launch and its resend: %+v %v, want 2 processes (started once)", kr, err)
	}

	for _, bad := range []*wire.LaunchReq{
		{Job: "dvm1.2", Argv: []string{"true"}, Mine: true},
		{Job: "dvm1.2", Argv: []string{"true"}, Mine: true, Ranks: wire.Span(2, 2), Data: data},
		{Job: "dvm1.2", Argv: []string{"true"}, Mine: true, Data: &wire.JobData{Job: "dvm1.2", Delta: true, Base: 1}},
	} {
		var rep wire.LaunchReply
		if err := mc.Call(ctx, wire.KindNodeLaunch, bad, &rep); wire.CodeOf(err) != wire.CodeInvalid {
			t.Errorf("launch %+v: %v, want invalid", bad, err)
		}
	}
	if err := mc.Call(ctx, wire.KindNodeStop, &wire.NodeStopReq{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Errorf("Run: %v", err)
	}
}
