package daemon

import (
	"fmt"
	"testing"
	"time"
)

// TestEvOrder: events from the master are handed on in the order it sent
// them (by their place, Prev: how many it sent this daemon before),
// whichever path brought each (its own connection or the tree), a copy is
// dropped, and what waits for one that does not come is handed on after
// evHoldLimit. The place, not the event's Seq, orders them: a new
// subscription's replay sends older events after newer ones, and they
// must reach the client.
func TestEvOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type arrival struct {
		prev  uint64
		name  string
		after time.Duration // since t0
		want  string        // names handed on
	}
	for _, tc := range []struct {
		name string
		in   []arrival
	}{
		{"in order", []arrival{{0, "a", 0, "[a]"}, {1, "b", 0, "[b]"}, {2, "c", 0, "[c]"}}},
		{"overtaken", []arrival{{1, "b", 0, "[]"}, {0, "a", 0, "[a b]"}}},
		{"a chain overtaken", []arrival{{0, "a", 0, "[a]"}, {2, "c", 0, "[]"}, {3, "d", 0, "[]"}, {1, "b", 0, "[b c d]"}}},
		{"copies", []arrival{{0, "a", 0, "[a]"}, {0, "a", 0, "[]"}, {1, "b", 0, "[b]"}, {0, "a", 0, "[]"}, {1, "b", 0, "[]"}}},
		{"a late copy of one overtaken", []arrival{{1, "b", 0, "[]"}, {0, "a", 0, "[a b]"}, {1, "b", 0, "[]"}}},
		{"a replay (older events) after newer ones", []arrival{{0, "seq50", 0, "[seq50]"}, {1, "seq41", 0, "[seq41]"}, {2, "seq42", 0, "[seq42]"}}},
		{"one never comes", []arrival{{0, "a", 0, "[a]"}, {2, "c", 0, "[]"}, {3, "d", time.Second, "[]"}, {4, "e", evHoldLimit, "[c d e]"}, {5, "f", evHoldLimit, "[f]"}}},
		{"after a flush, the late one is dropped", []arrival{{1, "b", 0, "[]"}, {2, "c", evHoldLimit, "[b c]"}, {0, "a", evHoldLimit, "[]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o evOrder
			for i, a := range tc.in {
				var got []string
				for _, h := range o.take(heldEvent{prev: a.prev, kind: a.name}, t0.Add(a.after)) {
					got = append(got, h.kind)
				}
				if s := fmt.Sprint(got); s != a.want {
					t.Fatalf("arrival %d (prev %d, %s): handed on %s, want %s", i, a.prev, a.name, s, a.want)
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
	for i := uint64(1); i <= evHoldMax+1; i++ {
		n += len(o.take(heldEvent{prev: i}, t0))
	}
	if n != evHoldMax+1 || len(o.held) != 0 || o.next != evHoldMax+2 {
		t.Fatalf("handed on %d of %d, %d held, next %d", n, evHoldMax+1, len(o.held), o.next)
	}
}
