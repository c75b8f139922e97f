package session

import (
	"fmt"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestRCSessionBounded: what a session remembers of past changes stays
// bounded however many it goes through (it grew by about 1 KiB per change
// and process without bound: scripts/scalebench -history), while a change
// still in flight is never forgotten and the newest settled ones are kept.
func TestRCSessionBounded(t *testing.T) {
	var r rcSession
	inflight := "mpi://rte/a/rc/0"
	r.saw(wire.RC{Delta: inflight, Status: wire.RCPending, Seq: 1, BoundRefs: []wire.PsetRef{{Name: "mpi://app/a"}}})
	const n = 10 * keepChanges
	for i := 1; i <= n; i++ {
		d := fmt.Sprintf("mpi://rte/a/rc/%d", i)
		r.saw(wire.RC{Delta: d, Status: wire.RCAnnounced, Seq: 1, BoundRefs: []wire.PsetRef{{Name: "mpi://app/a"}}})
		r.take(d, "")
		if i%3 == 0 {
			r.tell(d)
		}
		r.saw(wire.RC{Delta: d, Status: wire.RCFinalized, Seq: 2, BoundRefs: []wire.PsetRef{{Name: "mpi://app/a"}}})
	}
	if len(r.recs) > keepChanges+1 || len(r.order) > keepChanges+1 || len(r.parts) > keepChanges+1 || len(r.told) > keepChanges {
		t.Errorf("after %d changes: %d records, %d in order, %d parts, %d told; want at most %d each", n, len(r.recs), len(r.order), len(r.parts), len(r.told), keepChanges+1)
	}
	if _, ok := r.announced(inflight); !ok {
		t.Errorf("the change in flight was forgotten")
	}
	last := fmt.Sprintf("mpi://rte/a/rc/%d", n)
	if _, ok := r.announced(last); !ok || !r.taken(last, "") {
		t.Errorf("the newest change was forgotten")
	}
	if _, ok := r.announced("mpi://rte/a/rc/1"); ok {
		t.Errorf("the oldest settled change is still remembered")
	}
}
