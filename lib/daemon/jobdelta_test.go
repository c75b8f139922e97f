package daemon

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestApplyJobDelta: a delta of job data applies only to the generation it
// was made from; otherwise the push fails with ErrState (the master
// declares a node whose daemon fails a push down), rather than leaving
// the node with a wrong placement. The master sends deltas only to a
// daemon it queued the base generation for, so this is a safeguard.
func TestApplyJobDelta(t *testing.T) {
	d, err := newDaemon(Config{Node: "n1", Master: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	delta := &wire.JobData{Job: "j", Gen: 4, Size: 3, Delta: true, Base: 3,
		Placement: []wire.Placement{{Node: "n1", Ranks: wire.RankRanges{{Lo: 0, Hi: 1}}}, {Node: "n2"}, {Node: "n3", Ranks: wire.RankRanges{{Lo: 2, Hi: 2}}}}}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.applyJobDelta(delta); !errors.Is(err, wire.ErrState) || !strings.Contains(err.Error(), "has none") {
		t.Errorf("delta for an unknown job: %v, want ErrState", err)
	}
	jc := d.ensureJob("j", 1, "app")
	jc.data = wire.JobData{Job: "j", Gen: 2, Placement: []wire.Placement{{Node: "n2", Ranks: wire.RankRanges{{Lo: 1, Hi: 1}}}, {Node: "n1", Ranks: wire.RankRanges{{Lo: 0, Hi: 0}}}}}
	if _, err := d.applyJobDelta(delta); !errors.Is(err, wire.ErrState) || !strings.Contains(err.Error(), "generation 3, but this node has 2") {
		t.Errorf("delta from another generation: %v, want ErrState naming both", err)
	}
	jc.data.Gen = 3
	full, err := d.applyJobDelta(delta)
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.Placement{{Node: "n1", Ranks: wire.RankRanges{{Lo: 0, Hi: 1}}}, {Node: "n3", Ranks: wire.RankRanges{{Lo: 2, Hi: 2}}}}
	if full.Delta || full.Gen != 4 || full.Size != 3 || !slices.EqualFunc(full.Placement, want, func(a, b wire.Placement) bool {
		return a.Node == b.Node && slices.Equal(a.Ranks, b.Ranks)
	}) {
		t.Errorf("applied: %+v, want generation 4 with %v", full, want)
	}
}
