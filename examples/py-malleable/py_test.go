// Package pymalleable_test runs examples/py-malleable, a malleable
// application in Python that speaks the wire protocol itself (written from
// docs/wire.md alone), on a real DVM, grown and shrunk by a tool.
package pymalleable_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// python returns a python3 that can import msgpack (the one on $PATH, else
// Debian's /usr/bin/python3, where python3-msgpack goes), or skips t.
func python(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			tried = append(tried, py+": not found")
			continue
		}
		out, err := exec.Command(path, "-c", "import msgpack").CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, fmt.Sprintf("%s: %s", path, strings.TrimSpace(string(out))))
	}
	t.Skipf("needs python3 with its msgpack module (make deps-pymsgpack installs Debian's python3-msgpack): %s",
		strings.Join(tried, "; "))
	return ""
}

// iterLine is one "iter <i> rank <r> set <name>@<ver> size <n> sum <s> ok"
// line of the program.
type iterLine struct {
	iter, rank, size, sum int
	set                   string
}

// parse splits a job's output into its iter lines and its other stdout
// lines by rank; stderr lines fail t.
func parse(t *testing.T, raw []wire.OutputLine) (iters []iterLine, other map[uint32][]string) {
	t.Helper()
	other = map[uint32][]string{}
	for _, l := range raw {
		s := string(l.Line)
		if l.Stream == wire.StreamStderr {
			t.Errorf("rank %d wrote to stderr: %s", l.Rank, s)
			continue
		}
		f := strings.Fields(s)
		if len(f) != 11 || f[0] != "iter" || f[10] != "ok" {
			other[l.Rank] = append(other[l.Rank], s)
			continue
		}
		n := func(i int) int {
			v, err := strconv.Atoi(f[i])
			if err != nil {
				t.Errorf("rank %d: %q: field %d is not a number", l.Rank, s, i)
			}
			return v
		}
		iters = append(iters, iterLine{iter: n(1), rank: n(3), set: f[5], size: n(7), sum: n(9)})
	}
	return iters, other
}

// request asks for a change and waits until it is settled.
func request(ctx context.Context, t *testing.T, c *tool.Client, req wire.RCRequest) wire.RC {
	t.Helper()
	req.Wait = true
	rc := dvmtest.RequestRC(ctx, t, c, req)
	if rc.Status != wire.RCFinalized {
		t.Fatalf("%s %s ended %s: %s", req.Type, rc.Delta, rc.Status, rc.Reason)
	}
	return rc
}

// TestPythonGrowShrink launches the Python program with 2 ranks, grows it
// by 2 (ADD: ranks 2 and 3 confirm), shrinks it by rank 3 (SUB: rank 3
// leaves), replaces rank 1 by rank 4 (REPLACE: the root builds the union,
// then the difference; rank 1 leaves once FINALIZED), then stops it, once
// with blocking accepts and once with accepts called again while PENDING.
// Every iteration's exact sum (each rank adds its rank, the total must be
// the sum of the set's members) is checked by the program and again here,
// per set version: 0+1 at version 0, 0+1+2+3 at 1, 0+1+2 at 2, 0+2+4 at 4;
// every rank that stays ends with "done", and the job ends well.
func TestPythonGrowShrink(t *testing.T) {
	py := python(t)
	script, err := filepath.Abs("malleable.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"blocking", nil},
		{"poll", []string{"--poll"}},
	} {
		t.Run(tc.name, func(t *testing.T) { growShrink(t, append([]string{py, script}, tc.args...)) })
	}
}

func growShrink(t *testing.T, argv []string) {
	stop := filepath.Join(t.TempDir(), "stop")
	d := dvmtest.Start(t, dvmtest.Options{Nodes: 2, Slots: 3})
	c := d.Attach(t)
	out := dvmtest.CollectOutput(c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job := dvmtest.Launch(ctx, t, c, wire.JobLaunchReq{
		Argv: append(argv, "--stop-file", stop, "--sleep", "0.02"),
		N:    2, Env: d.Env, Name: "py", Output: wire.OutputFlags{Forward: true},
	})
	// seen waits until every rank of want has printed an iter line with
	// the given set version.
	seen := func(version string, want ...int) {
		t.Helper()
		ok := out.WaitFor(job, 60*time.Second, func(raw []wire.OutputLine) bool {
			its, _ := parse(t, raw)
			got := map[int]bool{}
			for _, l := range its {
				if strings.HasSuffix(l.set, "@"+version) && slices.Contains(want, l.rank) {
					got[l.rank] = true
				}
			}
			return len(got) == len(want)
		})
		if !ok {
			t.Fatalf("ranks %v never iterated at version %s; output:\n%s", want, version, dump(out.Lines(job)))
		}
	}
	seen("0", 0, 1)
	add := request(ctx, t, c, wire.RCRequest{Job: job, Type: wire.RCAdd, N: 2})
	seen("1", 0, 1, 2, 3)
	sub := request(ctx, t, c, wire.RCRequest{Job: job, Type: wire.RCSub, Ranks: wire.Span(3, 3)})
	seen("2", 0, 1, 2)
	repl := request(ctx, t, c, wire.RCRequest{Job: job, Type: wire.RCReplace, Ranks: wire.Span(1, 1)})
	seen("4", 0, 2, 4)
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	end := dvmtest.WaitJob(t, c, job, 60*time.Second)
	raw := out.Lines(job)
	if end.State != wire.JobStateDone {
		t.Fatalf("job ended %s: %s\n%s", end.State, end.Msg, dump(raw))
	}
	iters, other := parse(t, raw)
	set := "mpi://app/py"
	want := map[string]struct{ size, sum int }{
		set + "@0": {2, 0 + 1}, set + "@1": {4, 0 + 1 + 2 + 3}, set + "@2": {3, 0 + 1 + 2}, set + "@4": {3, 0 + 2 + 4},
	}
	perRank := map[int][]int{}
	for _, l := range iters {
		w, ok := want[l.set]
		if !ok || l.size != w.size || l.sum != w.sum {
			t.Errorf("rank %d iter %d: set %s size %d sum %d, want one of %v", l.rank, l.iter, l.set, l.size, l.sum, want)
		}
		perRank[l.rank] = append(perRank[l.rank], l.iter)
	}
	// Every rank counts iterations with the root: strictly increasing, and
	// the new ranks start where the others are.
	for r, its := range perRank {
		if !slices.IsSorted(its) || len(slices.Compact(slices.Clone(its))) != len(its) {
			t.Errorf("rank %d iterations not increasing: %v", r, its)
		}
	}
	for _, r := range []uint32{0, 2, 4} {
		if o := other[r]; len(o) != 1 || !strings.HasPrefix(o[0], fmt.Sprintf("done rank %d iters ", r)) {
			t.Errorf("rank %d's last words %q, want done", r, o)
		}
	}
	for r, delta := range map[uint32]string{3: sub.Delta, 1: repl.Delta} {
		if o := other[r]; len(o) != 1 || o[0] != fmt.Sprintf("left rank %d delta %s", r, delta) {
			t.Errorf("rank %d's last words %q, want left (delta %s)", r, o, delta)
		}
	}
	if len(perRank[2]) == 0 || len(perRank[3]) == 0 || perRank[2][0] <= perRank[0][0] {
		t.Errorf("the ranks added by %s did not join the iterations: %v", add.Delta, perRank)
	}
	if len(perRank[4]) == 0 || perRank[4][0] <= perRank[2][0] {
		t.Errorf("the rank started by %s did not join the iterations: %v", repl.Delta, perRank)
	}
}

// TestPythonWithGo runs one job whose even ranks are the Python program
// (--follow: only the changes) and whose odd ranks are internal/malleable
// (lib/session), through an ADD, a SUB, a REPLACE and another ADD, as
// TestMixedImplementations does for the raw Go client. A Python rank is the
// root of the first three (its set operations and accept speak for the Go
// members, the REPLACE replaces it), the Go rank 1 the root of the last;
// the confirm fences mix Python and Go new processes. Every process must
// see every change it takes part in FINALIZED with the same set version,
// the removed and replaced ones leave, and the job ends well.
func TestPythonWithGo(t *testing.T) {
	py := python(t)
	script, err := filepath.Abs("malleable.py")
	if err != nil {
		t.Fatal(err)
	}
	dvmtest.MixedJob(t, progs, "pygo", func(mall string) []string {
		// Both accept blocking: the members of a set send the same fields.
		return []string{py, script, "--follow", "4", "--odd", mall, "-blocking", "-last", "4", "-timeout", "60s"}
	})
}

func dump(raw []wire.OutputLine) string {
	var b strings.Builder
	for _, l := range raw {
		fmt.Fprintf(&b, "  rank %d (%d): %s\n", l.Rank, l.Stream, l.Line)
	}
	return b.String()
}
