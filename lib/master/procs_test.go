package master

import (
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestProcTable: ranks count on whatever is forgotten, a chunk whose ranks
// are all forgotten is freed, and rewind gives back forgotten top ranks.
func TestProcTable(t *testing.T) {
	var tab procTable
	for i := range 3 * procChunkSize {
		if r := tab.add(jproc{node: i % 2, state: wire.ProcStateRunning}); int(r) != i {
			t.Fatalf("add %d returned rank %d", i, r)
		}
	}
	for r := uint32(1); r < 2*procChunkSize; r++ {
		tab.forget(r)
	}
	tab.forget(1) // twice: nothing
	if len(tab.chunks) != 2 || tab.len() != 3*procChunkSize || tab.known() != 1+procChunkSize {
		t.Errorf("%d chunks, len %d, %d known; want 2 (the first keeps rank 0), %d, %d", len(tab.chunks), tab.len(), tab.known(), 3*procChunkSize, 1+procChunkSize)
	}
	cases := []struct {
		r     uint32
		known bool
	}{{0, true}, {1, false}, {procChunkSize, false}, {2 * procChunkSize, true}, {3 * procChunkSize, false}}
	for _, c := range cases {
		if got := tab.at(c.r) != nil; got != c.known {
			t.Errorf("at(%d) known %v, want %v", c.r, got, c.known)
		}
	}
	var seen []uint32
	tab.each(func(r uint32, _ *jproc) { seen = append(seen, r) })
	if len(seen) != 1+procChunkSize || seen[0] != 0 || seen[1] != 2*procChunkSize || !slices.IsSorted(seen) {
		t.Errorf("each visited %d ranks: %v...", len(seen), seen[:min(3, len(seen))])
	}
	if r := tab.add(jproc{state: wire.ProcStateLaunching}); r != 3*procChunkSize {
		t.Errorf("next rank after forgetting: %d", r)
	}
	if tab.rewind(3 * procChunkSize) {
		t.Error("rewound over a known rank")
	}
	tab.forget(3 * procChunkSize)
	if !tab.rewind(3*procChunkSize) || tab.len() != 3*procChunkSize {
		t.Errorf("rewind: len %d", tab.len())
	}
}
