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

// TestSeenBy: the size and local ranks a process is told at Init while a
// change is in flight (wire.JobData.Pending) are the job before the
// change, except for the change's own new processes and once the change
// is FINALIZED.
func TestSeenBy(t *testing.T) {
	rr := func(lo, hi uint32) wire.RankRanges { return wire.Span(lo, hi) }
	sub := wire.JobData{Job: "j", Gen: 2, Size: 1, Pending: "d",
		Placement: []wire.Placement{{Node: "n1", Ranks: rr(0, 0)}},
		Leaving:   rr(1, 2)} // rank 2 runs here, rank 1 on n2 (elsewhere)
	add := wire.JobData{Job: "j", Gen: 2, Size: 4, Pending: "d", Adding: rr(3, 3),
		Placement: []wire.Placement{{Node: "n1", Ranks: rr(0, 3)}}}
	replace := wire.JobData{Job: "j", Gen: 2, Size: 2, Pending: "d", Adding: rr(2, 2),
		Placement: []wire.Placement{{Node: "n1", Ranks: wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 2, Hi: 2}}}},
		Leaving:   rr(1, 1)}
	plain := wire.JobData{Job: "j", Gen: 2, Size: 2, Placement: []wire.Placement{{Node: "n1", Ranks: rr(0, 1)}}}
	tests := []struct {
		name   string
		data   wire.JobData
		status string // of the record of "d" on the daemon, "" = none yet
		rank   uint32
		size   uint32
		local  wire.RankRanges
		// elsewhere is a leaving rank that runs on another node (0: none)
		elsewhere uint32
	}{
		{"no change", plain, "", 1, 2, rr(0, 1), 0},
		{"SUB: a staying rank", sub, "", 0, 3, rr(0, 0).Union(rr(2, 2)), 1},
		{"SUB: a leaving rank", sub, wire.RCAnnounced, 2, 3, rr(0, 0).Union(rr(2, 2)), 1},
		{"SUB FINALIZED", sub, wire.RCFinalized, 0, 1, rr(0, 0), 1},
		{"ADD: a rank of the launch", add, wire.RCPending, 1, 3, rr(0, 2), 0},
		{"ADD: its new rank", add, wire.RCPending, 3, 4, rr(0, 3), 0},
		{"ADD FINALIZED", add, wire.RCFinalized, 1, 4, rr(0, 3), 0},
		{"REPLACE: a staying rank", replace, wire.RCAnnounced, 0, 2, rr(0, 1), 0},
		{"REPLACE: its new rank", replace, wire.RCAnnounced, 2, 2, wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 2, Hi: 2}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := newDaemon(Config{Node: "n1", Master: "/nonexistent"})
			if err != nil {
				t.Fatal(err)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			data := tt.data
			jc := d.cacheJob(&data, nil)
			for r := range tt.data.Leaving.All() {
				if r != tt.elsewhere {
					d.live[procKey{"j", r}] = &procEntry{} // runs on this node
				}
			}
			if tt.status != "" {
				jc.rcs = newRCCache()
				jc.rcs.byDelta["d"] = &wire.RC{Delta: "d", Job: "j", Status: tt.status}
			}
			size, local := d.seenBy(jc, tt.rank)
			if size != tt.size || !slices.Equal(local, tt.local) {
				t.Errorf("rank %d sees size %d, local %v; want %d, %v", tt.rank, size, local, tt.size, tt.local)
			}
		})
	}
}
