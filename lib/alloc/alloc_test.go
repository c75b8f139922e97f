package alloc

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

func grid(nodes, slots int) []Node {
	out := make([]Node, nodes)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("node%d", i+1), Slots: slots}
	}
	return out
}

func mustNew(t testing.TB, nodes []Node) *Alloc {
	t.Helper()
	a, err := New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustAlloc(t testing.TB, a *Alloc, job string, n int, o Options) []Proc {
	t.Helper()
	ps, err := a.Allocate(job, n, o)
	if err != nil {
		t.Fatal(err)
	}
	check(t, a)
	return ps
}

// check verifies that the slot table and the per-job records agree.
func check(t testing.TB, a *Alloc) {
	t.Helper()
	free, used := 0, make([]int, len(a.nodes))
	for s, j := range a.holder {
		if j == nil {
			free++
			continue
		}
		used[a.nodeOf[s]]++
		p, ok := j.procs[a.rankOf[s]]
		if !ok || p.Slot != s || p.Node != a.nodeOf[s] {
			t.Fatalf("slot %d: holder %s rank %d, record %+v", s, j.name, a.rankOf[s], p)
		}
	}
	if free != a.free || !slices.Equal(used, a.used) {
		t.Fatalf("free %d (counted %d), used %v (counted %v)", a.free, free, a.used, used)
	}
	nproc := 0
	for _, j := range a.jobs {
		nproc += len(j.procs)
		for r, p := range j.procs {
			if p.Rank != r || p.Rank >= j.next {
				t.Fatalf("job %s: rank %d recorded as %+v (next %d)", j.name, r, p, j.next)
			}
			if p.Slot == Oversubscribed {
				found := false
				for i, rr := range a.over[p.Node] {
					found = found || (rr == r && a.overJ[p.Node][i] == j)
				}
				if !found {
					t.Fatalf("job %s rank %d oversubscribed on node %d but not listed", j.name, r, p.Node)
				}
			} else if a.holder[p.Slot] != j || a.rankOf[p.Slot] != r {
				t.Fatalf("job %s rank %d claims slot %d", j.name, r, p.Slot)
			}
		}
	}
	onSlots := len(a.holder) - a.free
	for i, o := range a.over {
		onSlots += len(o)
		if len(o) > 0 && a.used[i] != a.nodes[i].Slots {
			t.Fatalf("node %d has %d oversubscribed processes but only %d/%d slots used", i, len(o), a.used[i], a.nodes[i].Slots)
		}
	}
	if onSlots != nproc {
		t.Fatalf("%d processes placed, %d recorded", onSlots, nproc)
	}
	// Slot numbering: each node's slots follow the previous node's, and a
	// removed node has none and holds nothing.
	total := 0
	for i, n := range a.nodes {
		if a.base[i] != total {
			t.Fatalf("node %d starts at slot %d, want %d", i, a.base[i], total)
		}
		for s := total; s < total+n.Slots; s++ {
			if a.nodeOf[s] != i {
				t.Fatalf("slot %d belongs to node %d, want %d", s, a.nodeOf[s], i)
			}
		}
		total += n.Slots
		if a.gone[i] && (n.Slots != 0 || a.used[i] != 0 || len(a.over[i]) != 0) {
			t.Fatalf("removed node %d: %d slots, %d used, %d oversubscribed", i, n.Slots, a.used[i], len(a.over[i]))
		}
	}
	if total != len(a.holder) || len(a.nodeOf) != total || len(a.rankOf) != total {
		t.Fatalf("%d slots in nodes, tables of %d/%d/%d", total, len(a.holder), len(a.nodeOf), len(a.rankOf))
	}
}

// render draws the slot table like thesis fig. 7.1: one line per node, the
// rank on each slot ("." when free, "job:rank" for jobs other than main).
func render(a *Alloc, main string) string {
	var b strings.Builder
	for i, u := range a.Usage() {
		fmt.Fprintf(&b, "%s |", u.Name)
		for _, si := range a.SlotMap()[a.base[i] : a.base[i]+u.Slots] {
			switch si.Job {
			case "":
				b.WriteString("  .")
			case main:
				fmt.Fprintf(&b, " %2d", si.Rank)
			default:
				fmt.Fprintf(&b, " %s:%d", si.Job, si.Rank)
			}
		}
		fmt.Fprintf(&b, " | used %d/%d", u.Used, u.Slots)
		if u.Over > 0 {
			fmt.Fprintf(&b, " +%d over", u.Over)
		}
		b.WriteString("\n")
	}
	var names []string
	for _, n := range a.JobNodes(main) {
		names = append(names, a.nodes[n].Name)
	}
	fmt.Fprintf(&b, "job %s on %s, %d free\n", main, strings.Join(names, " "), a.Free())
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func ranksOf(ps []Proc) []uint32 {
	out := make([]uint32, len(ps))
	for i, p := range ps {
		out[i] = p.Rank
	}
	return out
}

func slotsOf(ps []Proc) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Slot
	}
	return out
}

func seq[T uint32 | int](from, to T) []T {
	var out []T
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestFigure71 replays thesis fig. 7.1 on 4 nodes of 4 slots.
func TestFigure71(t *testing.T) {
	a := mustNew(t, grid(4, 4))
	var pic strings.Builder

	// Epoch 1: the job starts with 6 processes on slots 0-5 (nodes 1-2).
	ps := mustAlloc(t, a, "job", 6, Options{})
	if !slices.Equal(ranksOf(ps), seq[uint32](0, 5)) || !slices.Equal(slotsOf(ps), seq(0, 5)) {
		t.Fatalf("epoch 1: %+v", ps)
	}
	if got := a.JobNodes("job"); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("epoch 1 nodes %v", got)
	}
	pic.WriteString("epoch 1: start 6\n" + render(a, "job"))

	// Epoch 2: adding 8 fills slots 6-13; nodes 3 and 4 join the job.
	ps = mustAlloc(t, a, "job", 8, Options{})
	if !slices.Equal(ranksOf(ps), seq[uint32](6, 13)) || !slices.Equal(slotsOf(ps), seq(6, 13)) {
		t.Fatalf("epoch 2: %+v", ps)
	}
	if got := a.JobNodes("job"); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("epoch 2 nodes %v", got)
	}
	pic.WriteString("epoch 2: add 8\n" + render(a, "job"))

	// Epoch 3: removing 4 takes the highest slots 13, 12, 11, 10; node 4
	// leaves the job.
	v, err := a.Victims("job", 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v, []uint32{13, 12, 11, 10}) {
		t.Fatalf("victims %v", v)
	}
	if a.Size("job") != 14 {
		t.Fatal("Victims changed the job")
	}
	if err := a.Release("job", v); err != nil {
		t.Fatal(err)
	}
	check(t, a)
	if got := a.JobNodes("job"); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("epoch 3 nodes %v", got)
	}
	pic.WriteString("epoch 3: sub 4\n" + render(a, "job"))

	// A later ADD of 1 gets a fresh rank (14) on the lowest free slot (10).
	ps = mustAlloc(t, a, "job", 1, Options{})
	if want := []Proc{{Rank: 14, Slot: 10, Node: 2}}; !reflect.DeepEqual(ps, want) {
		t.Fatalf("add 1: %+v", ps)
	}
	pic.WriteString("then: add 1\n" + render(a, "job"))
	golden(t, "fig71.golden", pic.String())
}

func TestMapByNode(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		other []int // slots taken by job "x" first (by slot, in order)
		n     int
		want  []Proc
	}{
		{
			name: "empty 3x2", nodes: grid(3, 2), n: 4,
			want: []Proc{{0, 0, 0}, {1, 2, 1}, {2, 4, 2}, {3, 1, 0}},
		},
		{
			name: "fill all", nodes: grid(3, 2), n: 6,
			want: []Proc{{0, 0, 0}, {1, 2, 1}, {2, 4, 2}, {3, 1, 0}, {4, 3, 1}, {5, 5, 2}},
		},
		{
			name: "skips the busy slot of node 1", nodes: grid(3, 2), other: []int{0}, n: 4,
			want: []Proc{{0, 1, 0}, {1, 2, 1}, {2, 4, 2}, {3, 3, 1}},
		},
		{
			name: "skips a full node", nodes: grid(3, 2), other: []int{0, 1}, n: 3,
			want: []Proc{{0, 2, 1}, {1, 4, 2}, {2, 3, 1}},
		},
		{
			name: "uneven nodes", nodes: []Node{{"a", 1}, {"b", 3}, {"c", 0}, {"d", 2}}, n: 5,
			want: []Proc{{0, 0, 0}, {1, 1, 1}, {2, 4, 3}, {3, 2, 1}, {4, 5, 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustNew(t, tt.nodes)
			if len(tt.other) > 0 {
				ps := mustAlloc(t, a, "x", len(tt.other), Options{})
				if !slices.Equal(slotsOf(ps), tt.other) {
					t.Fatalf("setup: %+v", ps)
				}
			}
			got := mustAlloc(t, a, "job", tt.n, Options{MapBy: MapByNode})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestNotEnoughSlots(t *testing.T) {
	a := mustNew(t, grid(4, 4))
	mustAlloc(t, a, "job", 14, Options{})
	before := render(a, "job")
	for _, mb := range []MapBy{MapBySlot, MapByNode} {
		_, err := a.Allocate("job", 5, Options{MapBy: mb})
		if !errors.Is(err, wire.ErrNoResources) {
			t.Fatalf("want ErrNoResources, got %v", err)
		}
		for _, part := range []string{"asked for 5", "only 2 of 16 slots are free"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q lacks %q", err, part)
			}
		}
	}
	// A new job that does not fit is not created either.
	if _, err := a.Allocate("other", 3, Options{}); !errors.Is(err, wire.ErrNoResources) {
		t.Fatal(err)
	}
	if got := render(a, "job"); got != before || a.NextRank("job") != 14 || slices.Contains(a.Jobs(), "other") {
		t.Errorf("failed Allocate changed the table:\n%s", got)
	}
	ps := mustAlloc(t, a, "job", 2, Options{})
	if !slices.Equal(slotsOf(ps), []int{14, 15}) || a.Free() != 0 {
		t.Errorf("last two: %+v", ps)
	}
}

func TestOversubscribe(t *testing.T) {
	a := mustNew(t, grid(2, 2))
	mustAlloc(t, a, "b", 1, Options{})   // slot 0
	mustAlloc(t, a, "job", 2, Options{}) // slots 1, 2
	// 1 free slot (3), then 4 beyond: node1, node2, node1, node2 by the
	// fewest-oversubscribed rule.
	ps := mustAlloc(t, a, "job", 5, Options{Oversubscribe: true})
	want := []Proc{{2, 3, 1}, {3, -1, 0}, {4, -1, 1}, {5, -1, 0}, {6, -1, 1}}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("got  %+v\nwant %+v", ps, want)
	}
	// A later oversubscribed ADD keeps the balance: node1 (2) ties node2 (2).
	ps = mustAlloc(t, a, "job", 1, Options{Oversubscribe: true, MapBy: MapByNode})
	if want := []Proc{{7, -1, 0}}; !reflect.DeepEqual(ps, want) {
		t.Fatalf("second: %+v", ps)
	}
	if u := a.Usage(); u[0].Over != 3 || u[1].Over != 2 || u[0].Used != 2 || a.Free() != 0 {
		t.Errorf("usage %+v free %d", u, a.Free())
	}
	// Stack removal takes oversubscribed processes first, highest rank first.
	v, err := a.Victims("job", 3)
	if err != nil || !slices.Equal(v, []uint32{7, 6, 5}) {
		t.Fatalf("victims %v %v", v, err)
	}
	// Ending job b frees slot 0 on node1: the oldest oversubscribed process
	// there (rank 3) takes it; nothing becomes free.
	if err := a.ReleaseJob("b"); err != nil {
		t.Fatal(err)
	}
	check(t, a)
	if p, _ := a.Proc("job", 3); p.Slot != 0 || a.Free() != 0 || a.Usage()[0].Over != 2 {
		t.Errorf("after release: rank 3 %+v, free %d, usage %+v", p, a.Free(), a.Usage())
	}
	// Releasing an oversubscribed process and a slotted one on the same node
	// together must not hand the slot to the one being released.
	if err := a.Release("job", []uint32{0, 5}); err != nil { // rank 0 on slot 1, rank 5 over on node1
		t.Fatal(err)
	}
	check(t, a)
	if p, _ := a.Proc("job", 7); p.Slot != 1 {
		t.Errorf("rank 7 should now hold slot 1: %+v", p)
	}
	golden(t, "oversubscribe.golden", render(a, "job"))
}

func TestVictimErrors(t *testing.T) {
	a := mustNew(t, grid(2, 4))
	mustAlloc(t, a, "job", 4, Options{})
	tests := []struct {
		name string
		err  error
		want *wire.Error
		text string
	}{
		{"all by count", fn(a.Victims("job", 4)), wire.ErrInvalid, "every process"},
		{"more than all", fn(a.Victims("job", 9)), wire.ErrInvalid, "every process"},
		{"zero", fn(a.Victims("job", 0)), wire.ErrInvalid, "at least 1"},
		{"unknown job", fn(a.Victims("nope", 1)), wire.ErrNotFound, "nope"},
		{"all ranks", fn(a.VictimsRanks("job", []uint32{0, 1, 2, 3})), wire.ErrInvalid, "every process"},
		{"rank not in job", fn(a.VictimsRanks("job", []uint32{1, 7})), wire.ErrNotFound, "rank 7"},
		{"duplicate rank", fn(a.VictimsRanks("job", []uint32{1, 1})), wire.ErrInvalid, "rank 1 named twice"},
		{"no ranks", fn(a.VictimsRanks("job", nil)), wire.ErrInvalid, "no ranks"},
		{"release unknown rank", a.Release("job", []uint32{2, 9}), wire.ErrNotFound, "rank 9"},
		{"release unknown job", a.Release("nope", []uint32{0}), wire.ErrNotFound, "nope"},
		{"end unknown job", a.ReleaseJob("nope"), wire.ErrNotFound, "nope"},
		{"allocate zero", fn(a.Allocate("job", 0, Options{})), wire.ErrInvalid, "at least 1"},
		{"allocate no name", fn(a.Allocate("", 1, Options{})), wire.ErrInvalid, "empty job"},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) || !strings.Contains(tt.err.Error(), tt.text) {
			t.Errorf("%s: got %v, want %s containing %q", tt.name, tt.err, tt.want.Code, tt.text)
		}
	}
	// A failed Release left rank 2 alone.
	if a.Size("job") != 4 {
		t.Errorf("size %d", a.Size("job"))
	}
	v, err := a.VictimsRanks("job", []uint32{2, 0})
	if err != nil || !slices.Equal(v, []uint32{2, 0}) {
		t.Errorf("named victims %v %v", v, err)
	}
}

func fn[T any](_ T, err error) error { return err }

func TestNewValidation(t *testing.T) {
	for _, nodes := range [][]Node{
		nil,
		{{"", 2}},
		{{"a", 2}, {"a", 1}},
		{{"a", -1}},
	} {
		if _, err := New(nodes); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("New(%v): %v", nodes, err)
		}
	}
	a := mustNew(t, []Node{{"a", 0}, {"b", 2}})
	if a.Total() != 2 || a.Free() != 2 {
		t.Errorf("total %d free %d", a.Total(), a.Free())
	}
	for in, want := range map[string]MapBy{"": MapBySlot, "SLOT": MapBySlot, "node": MapByNode} {
		if got, err := ParseMapBy(in); err != nil || got != want {
			t.Errorf("ParseMapBy(%q) = %v %v", in, got, err)
		}
	}
	if _, err := ParseMapBy("socket"); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("ParseMapBy(socket): %v", err)
	}
}

// TestTwoJobs shares one DVM between two jobs: each grows into the next free
// slots and shrinks from its own highest slots only.
func TestTwoJobs(t *testing.T) {
	a := mustNew(t, grid(4, 4))
	mustAlloc(t, a, "a", 6, Options{})      // slots 0-5
	b := mustAlloc(t, a, "b", 5, Options{}) // slots 6-10
	if !slices.Equal(slotsOf(b), seq(6, 10)) || !slices.Equal(ranksOf(b), seq[uint32](0, 4)) {
		t.Fatalf("job b: %+v", b)
	}
	more := mustAlloc(t, a, "a", 3, Options{}) // slots 11-13, ranks 6-8
	if !slices.Equal(slotsOf(more), seq(11, 13)) || !slices.Equal(ranksOf(more), seq[uint32](6, 8)) {
		t.Fatalf("job a grows: %+v", more)
	}
	v, _ := a.Victims("b", 2)
	if !slices.Equal(v, []uint32{4, 3}) { // b's slots 10 and 9, not a's 13, 12
		t.Fatalf("b victims %v", v)
	}
	if err := a.Release("b", v); err != nil {
		t.Fatal(err)
	}
	check(t, a)
	// a now refills the holes that b left, lowest first.
	ps := mustAlloc(t, a, "a", 3, Options{})
	if !slices.Equal(slotsOf(ps), []int{9, 10, 14}) {
		t.Fatalf("refill: %+v", ps)
	}
	if got := a.JobNodes("b"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("b nodes %v", got)
	}
	if got := a.Jobs(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("jobs %v", got)
	}
	golden(t, "twojobs.golden", render(a, "a"))
	if err := a.ReleaseJob("a"); err != nil {
		t.Fatal(err)
	}
	check(t, a)
	if a.Free() != 13 || a.Size("a") != 0 || len(a.Procs("a")) != 0 {
		t.Errorf("after end of a: free %d", a.Free())
	}
}

// TestRanksNeverReused runs random grow/shrink rounds on two jobs and checks
// that every rank handed out is new and above all earlier ones, and that the
// table stays consistent.
func TestRanksNeverReused(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 42))
	a := mustNew(t, []Node{{"n1", 5}, {"n2", 3}, {"n3", 8}, {"n4", 4}})
	issued := map[string]map[uint32]bool{"a": {}, "b": {}}
	high := map[string]int64{"a": -1, "b": -1}
	for round := range 3000 {
		job := "a"
		if rng.IntN(2) == 1 {
			job = "b"
		}
		size := a.Size(job)
		switch op := rng.IntN(3); {
		case op == 0 || size < 2: // grow
			opts := Options{MapBy: MapBy(rng.IntN(2)), Oversubscribe: rng.IntN(4) == 0}
			n := 1 + rng.IntN(6)
			ps, err := a.Allocate(job, n, opts)
			if err != nil {
				if !errors.Is(err, wire.ErrNoResources) || opts.Oversubscribe || n <= a.Free() {
					t.Fatalf("round %d: %v", round, err)
				}
				continue
			}
			for _, p := range ps {
				if issued[job][p.Rank] || int64(p.Rank) <= high[job] {
					t.Fatalf("round %d: job %s got rank %d again (highest so far %d)", round, job, p.Rank, high[job])
				}
				issued[job][p.Rank] = true
				high[job] = int64(p.Rank)
			}
		case op == 1: // stack shrink
			v, err := a.Victims(job, 1+rng.IntN(size-1))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := a.Release(job, v); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		default: // named shrink
			procs := a.Procs(job)
			rng.Shuffle(len(procs), func(i, j int) { procs[i], procs[j] = procs[j], procs[i] })
			v, err := a.VictimsRanks(job, ranksOf(procs[:1+rng.IntN(size-1)]))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if err := a.Release(job, v); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		check(t, a)
	}
	if len(issued["a"]) < 100 || len(issued["b"]) < 100 {
		t.Errorf("too few ranks exercised: %d, %d", len(issued["a"]), len(issued["b"]))
	}
}

// BenchmarkAllocateRelease grows a 28-process job by 28 and shrinks it back
// on a 4x28 DVM.
func BenchmarkAllocateRelease(b *testing.B) {
	for _, mb := range []MapBy{MapBySlot, MapByNode} {
		b.Run("map-by-"+mb.String(), func(b *testing.B) {
			a := mustNew(b, grid(4, 28))
			mustAlloc(b, a, "job", 28, Options{})
			b.ReportAllocs()
			for b.Loop() {
				ps, err := a.Allocate("job", 28, Options{MapBy: mb})
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Release("job", ranksOf(ps)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("victims", func(b *testing.B) {
		a := mustNew(b, grid(4, 28))
		mustAlloc(b, a, "job", 28, Options{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Allocate("job", 28, Options{}); err != nil {
				b.Fatal(err)
			}
			v, err := a.Victims("job", 28)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Release("job", v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRetract: the newest allocation can be taken back whole, counter
// included; anything else is refused and changes nothing.
func TestRetract(t *testing.T) {
	a := mustNew(t, grid(2, 4))
	mustAlloc(t, a, "j", 3, Options{})
	ps := mustAlloc(t, a, "j", 3, Options{Oversubscribe: true})
	mustAlloc(t, a, "k", 1, Options{}) // another job's allocation does not matter
	cases := []struct {
		name string
		job  string
		ps   []Proc
		code *wire.Error
	}{
		{"not the newest", "j", ps[:2], wire.ErrState},
		{"not consecutive", "j", []Proc{ps[0], ps[2]}, wire.ErrInvalid},
		{"unknown job", "x", ps, wire.ErrNotFound},
	}
	for _, c := range cases {
		if err := a.Retract(c.job, c.ps); !errors.Is(err, c.code) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code.Code)
		}
	}
	if a.NextRank("j") != 6 || a.Size("j") != 6 {
		t.Fatalf("refused retracts changed the job: next %d size %d", a.NextRank("j"), a.Size("j"))
	}
	if err := a.Retract("j", ps); err != nil {
		t.Fatal(err)
	}
	if a.NextRank("j") != 3 || a.Size("j") != 3 || a.Free() != 8-4 {
		t.Errorf("after retract: next %d size %d free %d", a.NextRank("j"), a.Size("j"), a.Free())
	}
	check(t, a)
	again := mustAlloc(t, a, "j", 2, Options{})
	if again[0].Rank != 3 {
		t.Errorf("next rank after retract: %d", again[0].Rank)
	}
	// Rewind: only past ranks that hold no slot any more.
	if err := a.Rewind("j", 4); !errors.Is(err, wire.ErrState) {
		t.Errorf("rewind over a held rank: %v", err)
	}
	if err := a.Rewind("j", 9); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("rewind forward: %v", err)
	}
	if err := a.Release("j", []uint32{3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := a.Rewind("j", 3); err != nil || a.NextRank("j") != 3 {
		t.Errorf("rewind to 3: %v, next %d", err, a.NextRank("j"))
	}
}

// The heap that places oversubscribed processes keeps the documented rule
// exactly: each goes to the allowed node with the fewest oversubscribed
// processes at that moment, lowest index on ties, never one with 0 slots.
// Checked against that
// rule, scanned linearly, over random sequences of grows and shrinks.
func TestOversubscribedPlacementRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 200 {
		nodes := make([]Node, 1+rng.IntN(6))
		for i := range nodes {
			nodes[i] = Node{Name: "n" + strconv.Itoa(i), Slots: rng.IntN(3)}
		}
		a, err := New(nodes)
		if err != nil {
			t.Fatal(err)
		}
		var live []uint32
		for step := range 8 {
			if len(live) > 1 && rng.IntN(3) == 0 {
				k := 1 + rng.IntN(len(live)-1)
				if err := a.Release("j", live[:k]); err != nil {
					t.Fatal(err)
				}
				live = live[k:]
				continue
			}
			var opts Options
			opts.Oversubscribe = true
			if rng.IntN(2) == 0 {
				opts.Nodes = []int{rng.IntN(len(nodes)), rng.IntN(len(nodes))}
			}
			counts := make([]int, len(nodes))
			for i := range counts {
				counts[i] = len(a.over[i])
			}
			eligible := false // a node with slots: 0-slot nodes take none
			for i := range nodes {
				eligible = eligible || nodes[i].Slots > 0 && (len(opts.Nodes) == 0 || slices.Contains(opts.Nodes, i))
			}
			procs, err := a.Allocate("j", 1+rng.IntN(9), opts)
			if err != nil && !eligible && errors.Is(err, wire.ErrNoResources) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range procs {
				live = append(live, p.Rank)
				if p.Slot != Oversubscribed {
					continue
				}
				want := -1
				for i := range counts {
					if nodes[i].Slots > 0 && (len(opts.Nodes) == 0 || slices.Contains(opts.Nodes, i)) && (want < 0 || counts[i] < counts[want]) {
						want = i
					}
				}
				if p.Node != want {
					t.Fatalf("round %d step %d: rank %d went to node %d, the rule says %d (counts %v, nodes %v)", round, step, p.Rank, p.Node, want, counts, opts.Nodes)
				}
				counts[want]++
			}
		}
	}
}

// BenchmarkOversubscribeManyNodes: the largest request the default limits
// allow (65536 processes) oversubscribed on the most nodes (4096); it runs
// on the master's loop, so it must stay well under invariant (f)'s second.
func BenchmarkOversubscribeManyNodes(b *testing.B) {
	nodes := make([]Node, wire.DefaultNodes)
	for i := range nodes {
		nodes[i] = Node{Name: "n" + strconv.Itoa(i), Slots: 1}
	}
	for b.Loop() {
		a, err := New(nodes)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Allocate("j", wire.DefaultProcsPerChange, Options{Oversubscribe: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// A node with 0 slots (the master's host when the host list does not name
// it) never gets a process: not by slot, not by node, not oversubscribed,
// not when it is the only node asked for.
func TestZeroSlotNode(t *testing.T) {
	nodes := []Node{{Name: "h0", Slots: 0}, {Name: "h1", Slots: 2}, {Name: "h2", Slots: 1}}
	cases := []struct {
		name string
		n    int
		opts Options
		err  string
	}{
		{name: "by slot", n: 3},
		{name: "by node", n: 3, opts: Options{MapBy: MapByNode}},
		{name: "oversubscribed", n: 7, opts: Options{Oversubscribe: true}},
		{name: "oversubscribed by node", n: 7, opts: Options{Oversubscribe: true, MapBy: MapByNode}},
		{name: "too many", n: 4, err: "only 3 of 3 slots are free"},
		{name: "only node 0", n: 1, opts: Options{Nodes: []int{0}}, err: "only 0 of 0 slots"},
		{name: "only node 0, oversubscribed", n: 1, opts: Options{Nodes: []int{0}, Oversubscribe: true}, err: "no node it may use has slots to oversubscribe"},
	}
	for _, c := range cases {
		a := mustNew(t, nodes)
		ps, err := a.Allocate("job", c.n, c.opts)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, wire.ErrNoResources) {
				t.Errorf("%s: got %v, %v; want error %q", c.name, ps, err, c.err)
			}
			if a.Size("job") != 0 {
				t.Errorf("%s: a failed allocation left %d processes", c.name, a.Size("job"))
			}
			continue
		}
		if err != nil || len(ps) != c.n {
			t.Fatalf("%s: %v, %v", c.name, ps, err)
		}
		for _, p := range ps {
			if p.Node == 0 {
				t.Errorf("%s: rank %d placed on the 0-slot node", c.name, p.Rank)
			}
		}
		check(t, a)
	}
	// With no node of any slots (a host list naming only this host with
	// 0 slots cannot be written, but a DVM can shrink to it): no panic.
	a := mustNew(t, []Node{{Name: "h0"}})
	if _, err := a.Allocate("job", 1, Options{Oversubscribe: true}); !errors.Is(err, wire.ErrNoResources) {
		t.Errorf("only a 0-slot node: %v", err)
	}
}
