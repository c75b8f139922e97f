package master

import (
	"context"
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestStateSlots: dvm.state lists every used slot with its holder, in
// global order, then the oversubscribed processes with slot -1.
func TestStateSlots(t *testing.T) {
	t.Parallel()
	d := startDVM(t, 2, 2)
	rep, err := d.launch(wire.JobLaunchReq{Argv: sh(`echo up; exec sleep 30`), N: 5, Oversubscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, 5)
	st, err := d.c.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Slots) != 5 {
		t.Fatalf("slots %+v, want 5 entries", st.Slots)
	}
	var ranks []uint32
	for i, su := range st.Slots {
		if su.Job != rep.Job {
			t.Errorf("entry %d: job %q, want %q", i, su.Job, rep.Job)
		}
		ranks = append(ranks, su.Rank)
		switch {
		case i < 4 && (su.Slot != int32(i) || su.Node != uint32(i/2)):
			t.Errorf("entry %d: %+v, want slot %d on node %d", i, su, i, i/2)
		case i == 4 && su.Slot != -1:
			t.Errorf("oversubscribed entry %+v, want slot -1", su)
		}
	}
	slices.Sort(ranks)
	if !slices.Equal(ranks, []uint32{0, 1, 2, 3, 4}) {
		t.Errorf("ranks %v, want 0..4 once each", ranks)
	}
}
