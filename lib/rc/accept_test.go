package rc

import (
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestBoundOf: which bound set a member accepts for, and the errors a
// client gets otherwise.
func TestBoundOf(t *testing.T) {
	a, b := wire.PsetRef{Name: "mpi://app/x/a", Version: 2}, wire.PsetRef{Name: "mpi://app/x/b", Version: 5}
	sets := map[wire.PsetRef]wire.RankRanges{a: wire.Span(0, 3), b: wire.Span(3, 5)}
	members := func(r wire.PsetRef) (wire.RankRanges, error) {
		if m, ok := sets[r]; ok {
			return m, nil
		}
		return nil, wire.Errorf(wire.ErrNotFound, "no %s@%d", r.Name, r.Version)
	}
	two := &wire.RC{Delta: "mpi://rte/x/rc/1", Status: wire.RCAnnounced, BoundRefs: []wire.PsetRef{a, b}}
	for _, tc := range []struct {
		name string
		rec  *wire.RC
		rank uint32
		set  string
		want wire.PsetRef
		code wire.Code
	}{
		{"the only set holding the caller", two, 1, "", a, ""},
		{"named", two, 3, "mpi://app/x/b", b, ""},
		{"in two, none named", two, 3, "", wire.PsetRef{}, wire.CodeInvalid},
		{"in none", two, 9, "", wire.PsetRef{}, wire.CodePermission},
		{"named, not a member", two, 0, "mpi://app/x/b", b, wire.CodePermission},
		{"named, not bound", two, 0, "mpi://app/x/c", wire.PsetRef{}, wire.CodeInvalid},
		{"bad name", two, 0, "nope", wire.PsetRef{}, wire.CodeInvalid},
		{"not announced", &wire.RC{Delta: "mpi://rte/x/rc/2", Status: wire.RCNull}, 0, "", wire.PsetRef{}, wire.CodeState},
		{"version unknown", &wire.RC{Delta: "mpi://rte/x/rc/3", BoundRefs: []wire.PsetRef{{Name: a.Name, Version: 9}}}, 0, "", wire.PsetRef{}, wire.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, m, err := BoundOf(tc.rec, tc.rank, tc.set, members)
			if tc.code != "" {
				if wire.CodeOf(err) != tc.code {
					t.Fatalf("got %v (%s), want code %s", err, wire.CodeOf(err), tc.code)
				}
				return
			}
			if err != nil || ref != tc.want || m.String() != sets[tc.want].String() {
				t.Fatalf("got %v %v %v, want %v", ref, m, err, tc.want)
			}
		})
	}
}

// TestTerminates: the terminate rule of docs/wire.md ("Phase 3").
func TestTerminates(t *testing.T) {
	sub := &wire.RC{Type: wire.RCSub, Ranks: wire.Span(4, 5)}
	repl := &wire.RC{Type: wire.RCReplace, Ranks: wire.Span(8, 8), Out: wire.Span(2, 2)}
	add := &wire.RC{Type: wire.RCAdd, Ranks: wire.Span(6, 7)}
	for _, tc := range []struct {
		rec    *wire.RC
		rank   uint32
		status string
		want   bool
	}{
		{sub, 4, wire.RCPending, true},
		{sub, 5, wire.RCFinalized, true},
		{sub, 0, wire.RCFinalized, false},
		{repl, 2, wire.RCPending, false}, // may still be aborted
		{repl, 2, wire.RCFinalized, true},
		{repl, 0, wire.RCFinalized, false},
		{add, 6, wire.RCFinalized, false},
		{add, 0, wire.RCFinalized, false},
	} {
		if got := Terminates(tc.rec, tc.rank, tc.status); got != tc.want {
			t.Errorf("%s %v, rank %d, %s: terminate %v, want %v", tc.rec.Type, tc.rec.Ranks, tc.rank, tc.status, got, tc.want)
		}
	}
}
