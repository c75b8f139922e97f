package daemon

import (
	"fmt"
	"testing"
	"time"
)

// TestEvOrder: events from the master are handed on in the order it sent
// them, whichever path brought each (its own connection or the tree), a
// copy is dropped, and what waits for an event that does not come is
// handed on after evHoldLimit or past evHoldMax.
func TestEvOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type arrival struct {
		prev, seq uint64
		after     time.Duration // since t0
		want      string        // seqs handed on
	}
	for _, tc := range []struct {
		name string
		in   []arrival
	}{
		{"in order", []arrival{{0, 1, 0, "[1]"}, {1, 2, 0, "[2]"}, {2, 5, 0, "[5]"}}},
		{"overtaken", []arrival{{1, 2, 0, "[]"}, {0, 1, 0, "[1 2]"}}},
		{"a chain overtaken", []arrival{{0, 3, 0, "[3]"}, {5, 7, 0, "[]"}, {7, 9, 0, "[]"}, {3, 5, 0, "[5 7 9]"}}},
		{"copies", []arrival{{0, 1, 0, "[1]"}, {0, 1, 0, "[]"}, {1, 2, 0, "[2]"}, {0, 1, 0, "[]"}, {1, 2, 0, "[]"}}},
		{"a late copy of one overtaken", []arrival{{1, 2, 0, "[]"}, {0, 1, 0, "[1 2]"}, {1, 2, 0, "[]"}}},
		{"one never comes", []arrival{{0, 1, 0, "[1]"}, {4, 6, 0, "[]"}, {6, 8, time.Second, "[]"}, {8, 9, evHoldLimit, "[6 8 9]"}, {9, 10, evHoldLimit, "[10]"}}},
		{"after a flush, an old one is dropped", []arrival{{2, 3, 0, "[]"}, {3, 4, evHoldLimit, "[3 4]"}, {0, 2, evHoldLimit, "[]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o evOrder
			for i, a := range tc.in {
				var got []uint64
				for _, h := range o.take(a.prev, heldEvent{seq: a.seq}, t0.Add(a.after)) {
					got = append(got, h.seq)
				}
				if s := fmt.Sprint(got); s != a.want {
					t.Fatalf("arrival %d (prev %d, seq %d): handed on %s, want %s", i, a.prev, a.seq, s, a.want)
				}
			}
		})
	}
}

// TestEvOrderBounded: the events held for a missing one stay bounded.
func TestEvOrderBounded(t *testing.T) {
	var o evOrder
	t0 := time.Unix(1000, 0)
	n := 0
	for i := uint64(0); i <= evHoldMax; i++ {
		n += len(o.take(10+2*i, heldEvent{seq: 11 + 2*i}, t0))
	}
	if n != evHoldMax+1 || len(o.held) != 0 || o.last != 11+2*evHoldMax {
		t.Fatalf("handed on %d of %d, %d held, last %d", n, evHoldMax+1, len(o.held), o.last)
	}
}
