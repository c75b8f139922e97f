package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func readFixture(t *testing.T) Run {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "run.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func TestRead(t *testing.T) {
	run := readFixture(t)
	if len(run.Iters) != 6 || len(run.Changes) != 2 || run.End == nil {
		t.Fatalf("read %d iterations, %d changes, end %v; want 6, 2, set", len(run.Iters), len(run.Changes), run.End)
	}
	if it := run.Iters[2]; it.Iter != 2 || !it.Pending() || it.Delta != "mpi://rte/x/rc/1" {
		t.Errorf("the tagged line read as %+v", it)
	}
	if c := run.Changes[1]; c.Type != wire.RCSub || c.TotalMS() != 9 {
		t.Errorf("SUB change %+v: total %v, want 9 (all exited)", c, c.TotalMS())
	}
	if run.Changes[0].TotalMS() != 30.5 {
		t.Errorf("ADD total %v, want 30.5 (FINALIZED)", run.Changes[0].TotalMS())
	}
	if _, err := Read(strings.NewReader("{\"kind\":\"iter\",\"iter\":\"x\"}\n")); err == nil {
		t.Error("a malformed line gave no error")
	}
}

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	it := Iter{Kind: KindIter, Iter: 3, Procs: 5, WorkMS: 1.5, RCStatus: wire.RCPending, Count: 7}
	c := Change{Kind: KindChange, Delta: "d", Type: wire.RCAdd, Status: wire.RCFinalized, N: 2, FinalizedMS: 4}
	w.Line(it)
	w.Line(c)
	w.Line(End{Kind: KindEnd, Count: 7})
	if w.Err() != nil {
		t.Fatal(w.Err())
	}
	run, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(run.Iters, []Iter{it}) || !reflect.DeepEqual(run.Changes, []Change{c}) || run.End.Count != 7 {
		t.Errorf("round trip gave %+v", run)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestChangeTimes(t *testing.T) {
	const ms = int64(1e6)
	rec := wire.RC{Delta: "d", Type: wire.RCSub, Status: wire.RCFinalized, N: 3, Requester: wire.ByApp,
		Times: wire.RCTimes{Requested: 100 * ms, Announced: 101 * ms, Accepted: 105 * ms, Finalized: 106 * ms, Exited: 110 * ms}}
	var c Change
	ChangeTimes(&c, rec)
	want := Change{Delta: "d", Type: wire.RCSub, Status: wire.RCFinalized, N: 3, Requester: wire.ByApp,
		AnnouncedMS: 1, AcceptedMS: 5, FinalizedMS: 6, ExitedMS: 10, Phase1MS: 1}
	if c != want {
		t.Errorf("ChangeTimes = %+v, want %+v", c, want)
	}
}

func TestIterations(t *testing.T) {
	its := []Iter{
		{Iter: 2, Procs: 4, WorkMS: 1, RebalanceMS: 0.5, Delta: "a", RCStatus: wire.RCPending},
		{Iter: 0, Procs: 4, WorkMS: 1},
		{Iter: 1, Procs: 4, WorkMS: 1, Delta: "a", RCStatus: wire.RCPending, SyncMS: 2, RCMS: 3},
		{Iter: 3, Procs: 4, Delta: "a", RCStatus: wire.RCFinalized},
		{Iter: 4, Procs: 8, Delta: "b", RCStatus: wire.RCFinalized},
		{Iter: 5, Procs: 4, Delta: "c", RCStatus: wire.RCPending},
	}
	s := Iterations(its)
	if !reflect.DeepEqual(s.Iter, []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("iterations %v, want sorted 0..5", s.Iter)
	}
	if !reflect.DeepEqual(s.Pending, []bool{false, true, true, false, false, true}) {
		t.Errorf("pending %v", s.Pending)
	}
	if !reflect.DeepEqual(s.Spans, [][2]int{{1, 3}, {4, 4}, {5, 5}}) {
		t.Errorf("spans %v, want [[1 3] [4 4] [5 5]]", s.Spans)
	}
	if s.Work[2] != 1.5 || s.Sync[1] != 2 || s.RC[1] != 3 || s.Procs[4] != 8 {
		t.Errorf("values work %v sync %v rc %v procs %v", s.Work, s.Sync, s.RC, s.Procs)
	}
}

func TestPhasesOf(t *testing.T) {
	add := func(from, n int, p1, p3 float64) Change {
		return Change{Type: wire.RCAdd, Status: wire.RCFinalized, From: from, To: from + n, N: n, Phase1MS: p1, Phase3MS: p3}
	}
	cs := []Change{
		add(28, 28, 1, 10), add(28, 28, 3, 30), add(28, 56, 2, 20), add(56, 28, 4, 40),
		{Type: wire.RCAdd, Status: wire.RCAborted, From: 28, N: 84, Phase1MS: 99},
		{Type: wire.RCSub, Status: wire.RCFinalized, From: 56, To: 28, N: 28, CommMS: 5},
		{Type: wire.RCAdd, Status: wire.RCFinalized, From: 84, To: 112, N: 28, Blocking: true, Phase1MS: 7},
	}
	s := PhasesOf(cs, wire.RCAdd, false)
	if !reflect.DeepEqual(s.Deltas, []int{28, 56}) || !reflect.DeepEqual(s.Sizes, []int{28, 56}) {
		t.Fatalf("deltas %v sizes %v, want [28 56] [28 56] (aborted change left out)", s.Deltas, s.Sizes)
	}
	// phase 1, n_start 28: median(1,3)=2 at n_delta 28, 2 at 56; n_start 56: 4 at 28, none at 56.
	if got := s.Values[0]; !reflect.DeepEqual(got, [][]float64{{2, 2}, {4, 0}}) {
		t.Errorf("phase 1 values %v", got)
	}
	if got := s.Values[2][0][0]; got != 20 {
		t.Errorf("phase 3 (28, 28) = %v, want 20", got)
	}
	if b := PhasesOf(cs, wire.RCAdd, true); !reflect.DeepEqual(b.Sizes, []int{84}) || b.Values[0][0][0] != 7 {
		t.Errorf("blocking series: sizes %v values %v, want the one blocking change", b.Sizes, b.Values)
	}
	sub := PhasesOf(cs, wire.RCSub, false)
	if !reflect.DeepEqual(sub.Sizes, []int{28}) || sub.Values[3][0][0] != 5 {
		t.Errorf("SUB series keyed by n_dest: sizes %v values %v", sub.Sizes, sub.Values)
	}
	if !PhasesOf(nil, wire.RCAdd, false).Empty() {
		t.Error("no changes: series not empty")
	}
}

func TestTablesGolden(t *testing.T) {
	run := readFixture(t)
	var buf bytes.Buffer
	if err := Tables(&buf, run.Changes, "# "); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "tables.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != string(want) {
		t.Errorf("tables differ from %s:\n%s", golden, buf.String())
	}
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "# ") {
			t.Errorf("line without the prefix: %q", l)
		}
	}
	// The tables are comments for a reader of JSON lines.
	again, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil || len(again.Iters)+len(again.Changes) != 0 {
		t.Errorf("the tables read as data: %+v, %v", again, err)
	}
}

// Only finalized changes the runtime made of lost processes are marked as
// failures, at the iteration they took effect in.
func TestWithFailures(t *testing.T) {
	cs := []Change{
		{Requester: wire.ByRuntime, Status: wire.RCFinalized, N: 4, FirstIter: 8},
		{Requester: wire.ByRuntime, Status: wire.RCAborted, N: 1, FirstIter: 9},
		{Requester: wire.ByTool, Status: wire.RCFinalized, N: 4, FirstIter: 17},
	}
	got := IterSeries{}.WithFailures(cs).Failures
	if len(got) != 1 || got[0] != (Failure{Iter: 8, Lost: 4}) {
		t.Errorf("failures %+v, want one: 4 lost at iteration 8", got)
	}
}
