package session_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestSplitBindRecipe is the recipe of docs/rc.md "Bind a change to a
// sub-set", for real: 6 processes of internal/malleable -split-node on 3
// of 4 virtual nodes (2 slots each). Rank 0 splits the application set by
// node with Session.Split into the active sets .../node/0-2 and makes the
// application set inactive; each process then serves changes bound to its
// part. An ADD bound to node/1 (`dynrc add --pset`) is accepted by node/1
// alone and grows only it; a SUB of rank 4 bound to node/2 shrinks only
// node/2. node/0 never changes. Rank 0 also reports what Session.Split
// returned and the errors of bad splits, made through the application's
// path (daemon → master).
func TestSplitBindRecipe(t *testing.T) {
	d := startRCDVM(t, 4, 2)
	job := d.start(6, "-split-node", "-last", "2")
	app := pset.AppName(job.App)
	part := func(i int) string { return fmt.Sprintf("%s/node/%d", app, i) }
	d.waitFor(job.Job, "6 SPLIT lines", func(ls []mline) bool { return count(ls, "SPLIT") == 6 })

	ls := d.mlines(job.Job)
	for _, l := range linesOf(ls, "SPLIT", "") {
		if want := part(int(l.Rank) / 2); l.Str("set") != want {
			t.Errorf("rank %d works with %s, want %s", l.Rank, l.Str("set"), want)
		}
	}
	pl := linesOf(ls, "SPLITPARTS", "")
	if len(pl) != 1 || pl[0].Rank != 0 {
		t.Fatalf("SPLITPARTS lines: %v", pl)
	}
	var parts []struct {
		Name, Members, Node string
		Version             uint32
		Active              bool
	}
	if b, err := json.Marshal(pl[0].Attrs["parts"]); err != nil || json.Unmarshal(b, &parts) != nil {
		t.Fatalf("parts %v", pl[0].Attrs["parts"])
	}
	if len(parts) != 3 {
		t.Fatalf("Session.Split returned %+v, want 3 parts", parts)
	}
	for i, p := range parts {
		want := fmt.Sprintf("%d-%d", 2*i, 2*i+1)
		if p.Name != part(i) || p.Members != want || p.Node != fmt.Sprintf("node%d", i) || p.Version != 0 || !p.Active {
			t.Errorf("part %d: %+v, want %s = %s on node%d, active", i, p, part(i), want, i)
		}
	}
	refused, _ := pl[0].Attrs["refused"].([]any)
	for i, want := range []string{"(2 set)", "exactly one of SplitOptions.Parts, Ranks and ByNode (0 set)", "(6 members) into 100 parts",
		"members in no part: 2-5", ""} {
		if i >= len(refused) {
			t.Fatalf("refused: %v", refused)
		}
		got := fmt.Sprint(refused[i])
		if want == "" { // splitting mpi://SELF is the caller's own rank
			if got != "<nil>" {
				t.Errorf("split of SELF: %s", got)
			}
			continue
		}
		if !strings.Contains(got, want) {
			t.Errorf("bad split %d: %q, want %q", i, got, want)
		}
	}
	if me := d.pset(job.Job, app+"/me/0"); me.Members.String() != "0" || me.Active {
		t.Errorf("split of rank 0's SELF: %+v", me)
	}
	if a := d.pset(job.Job, app); a.Active {
		t.Errorf("%s still active after the split", app)
	}

	add := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 1, Bound: []string{part(1)}})
	if len(add.Bound) != 1 || add.Bound[0] != part(1) || add.Accepts != 1 || add.Ranks.String() != "6" {
		t.Fatalf("ADD bound to %s: bound %v, %d accepts, ranks %s", part(1), add.Bound, add.Accepts, add.Ranks)
	}
	sub := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, Ranks: wire.Span(4, 4), Bound: []string{part(2)}})
	if len(sub.Bound) != 1 || sub.Bound[0] != part(2) {
		t.Fatalf("SUB bound to %s: bound %v", part(2), sub.Bound)
	}
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
	}
	ls = d.mlines(job.Job)
	// Only the members of the bound part took part in each change.
	if r := ranksOf(linesOf(ls, "STATE", add.Delta)); r.String() != "2-3,6" {
		t.Errorf("ADD handled by %s, want node/1 and the new rank: 2-3,6", r)
	}
	if r := ranksOf(linesOf(ls, "STATE", sub.Delta)); r.String() != "5" {
		t.Errorf("SUB reported by %s, want the rest of node/2: 5", r)
	}
	if r := ranksOf(linesOf(ls, "LEFT", sub.Delta)); r.String() != "4" {
		t.Errorf("LEFT from %s, want 4", r)
	}
	// The inactive application set followed both changes (Definition 4
	// for the ADD, the runtime's cleanup of inactive sets for the SUB).
	if a := d.pset(job.Job, app); a.Active || a.Members.String() != "0-3,5-6" {
		t.Errorf("%s at the end: active %v members %s, want inactive 0-3,5-6", app, a.Active, a.Members)
	}
	for i, want := range []struct {
		version uint32
		members string
	}{{0, "0-1"}, {1, "2-3,6"}, {1, "5"}} {
		if p := d.pset(job.Job, part(i)); p.Version != want.version || p.Members.String() != want.members || !p.Active {
			t.Errorf("%s at the end: version %d members %s active %v, want version %d members %s", part(i), p.Version, p.Members, p.Active, want.version, want.members)
		}
	}
}
