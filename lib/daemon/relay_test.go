package daemon

import (
	"context"
	"testing"
	"time"

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
