package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes (see
// internal/dvmtest); heat itself is built once per run (by progs, with the
// race detector when the tests have it) into a temporary directory that
// TestMain removes.
var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// heatDVM runs heat jobs on a test DVM and collects their output.
type heatDVM struct {
	t   *testing.T
	d   *dvmtest.DVM
	c   *tool.Client
	bin string
	out *dvmtest.Output
}

func startHeatDVM(t *testing.T, nodes, slots int) *heatDVM {
	return startHeatDVMWith(t, dvmtest.Options{Nodes: nodes, Slots: slots})
}

func startHeatDVMWith(t *testing.T, o dvmtest.Options) *heatDVM {
	bin := progs.Build(t, "github.com/dynrt/dynrt/examples/heat")
	d := dvmtest.Start(t, o)
	h := &heatDVM{t: t, d: d, c: d.Attach(t), bin: bin}
	h.out = dvmtest.CollectOutput(h.c)
	return h
}

// result is what one run printed (--json) and wrote (--out).
type result struct {
	grid    Grid
	changes []map[string]any
	summary map[string]any
}

// run starts n processes of heat with args plus --json and --out, waits
// for the job's end and reads what it printed and wrote. Anything on
// stderr (the race detector reports there) fails the test.
func (h *heatDVM) run(t *testing.T, n int, args ...string) result {
	t.Helper()
	job, out := h.launch(t, n, args...)
	return h.collect(t, job, out, args)
}

// launch starts the job and returns its namespace and the --out file.
func (h *heatDVM) launch(t *testing.T, n int, args ...string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "grid.txt")
	argv := append([]string{h.bin, "--json", "--out", out, "--timeout", "60s"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := h.c.Launch(ctx, wire.JobLaunchReq{Argv: argv, N: uint32(n), Env: h.d.Env, Output: wire.OutputFlags{Forward: true}})
	if err != nil {
		t.Fatalf("launch %v: %v", args, err)
	}
	return rep.Job, out
}

// collect waits for the end of job and reads its output.
func (h *heatDVM) collect(t *testing.T, job, out string, args []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	end, err := h.c.WaitJob(ctx, job)
	lines := h.out.Lines(job)
	var text []string
	for _, l := range lines {
		text = append(text, fmt.Sprintf("rank %d/%d: %s", l.Rank, l.Stream, l.Line))
	}
	if err != nil || end.State != wire.JobStateDone || end.Code != 0 {
		t.Fatalf("heat %v: %v, ended %s code %d: %s\n%s", args, err, end.State, end.Code, end.Msg, strings.Join(text, "\n"))
	}
	var res result
	for _, l := range lines {
		if l.Stream == wire.StreamStderr {
			t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l.Line, &m); err != nil {
			t.Errorf("rank %d printed %q", l.Rank, l.Line)
			continue
		}
		switch m["kind"] {
		case "change":
			res.changes = append(res.changes, m)
		case "summary":
			if res.summary != nil {
				t.Errorf("two summaries:\n%s", strings.Join(text, "\n"))
			}
			res.summary = m
		}
	}
	if res.summary == nil {
		t.Fatalf("no summary:\n%s", strings.Join(text, "\n"))
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if res.grid, err = ReadGrid(f); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestResizeSchedules runs the same problem statically and under several
// grow/shrink schedules on 4 virtual nodes: every final grid equals the
// static run's (which equals a serial computation in this process), and
// every scheduled change happened.
func TestResizeSchedules(t *testing.T) {
	const nx, ny, steps = 64, 64, 200
	h := startHeatDVM(t, 4, 4)
	common := []string{"--nx", fmt.Sprint(nx), "--ny", fmt.Sprint(ny), "--steps", fmt.Sprint(steps), "--check", "5"}

	static := h.run(t, 4, common...)
	if d, err := MaxDiff(serial(nx, ny, steps), static.grid); err != nil || d != 0 {
		t.Fatalf("static run differs from the serial computation by %g (%v)", d, err)
	}
	if static.grid.Steps != steps || len(static.changes) != 0 || static.summary["procs"] != 4.0 {
		t.Errorf("static run: %d steps, %d changes, summary %v", static.grid.Steps, len(static.changes), static.summary)
	}

	tests := []struct {
		name  string
		n     int
		args  []string
		sizes []string // from→to of each change, in order
	}{
		{"grow 2 to 5", 2, []string{"--schedule", "20:+3"}, []string{"2→5"}},
		{"shrink 6 to 3", 6, []string{"--schedule", "20:-3"}, []string{"6→3"}},
		{"grow then shrink", 2, []string{"--schedule", "20:+2,60:-3"}, []string{"2→4", "4→1"}},
		{"remove the root's neighbours, then grow", 5, []string{"--schedule", "30:-r1/2,80:+2"}, []string{"5→3", "3→5"}},
		{"blocking grow and shrink by rank", 3, []string{"--blocking", "--schedule", "10:+3,50:-r2/4"}, []string{"3→6", "6→4"}},
		// Checkpoints (no loss) across changes: every process takes the
		// same ones, the new processes and the ones that stay included.
		// The removal comes before the grow can have ended: it waits
		// for it, its ranks counting among the 5 (it failed with
		// "removes rank 3 of 2 processes" when it did not).
		{"remove a rank the grow before adds", 2, []string{"--schedule", "20:+3,21:-r3"}, []string{"2→5", "5→4"}},
		{"--buddy: grow then shrink", 2, []string{"--buddy", "--checkpoint-every", "15", "--blocking", "--schedule", "20:+3,60:-r1/3"}, []string{"2→5", "5→3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := h.run(t, tc.n, append(common, tc.args...)...)
			d, err := MaxDiff(static.grid, res.grid)
			if err != nil || d > 1e-12 {
				t.Errorf("final grid differs from the static run's by %g (%v)", d, err)
			}
			var sizes []string
			for _, c := range res.changes {
				if c["status"] != wire.RCFinalized {
					t.Errorf("change %v: status %v", c["delta"], c["status"])
				}
				if c["moved_rows"].(float64) <= 0 || c["phase3_ns"].(float64) <= 0 || c["redist_ns"].(float64) <= 0 {
					t.Errorf("change %v: no rows moved or phases not timed: %v", c["delta"], c)
				}
				sizes = append(sizes, fmt.Sprintf("%v→%v", c["from"], c["to"]))
			}
			if strings.Join(sizes, ",") != strings.Join(tc.sizes, ",") {
				t.Errorf("changes %v, want %v", sizes, tc.sizes)
			}
			last := tc.sizes[len(tc.sizes)-1]
			if want := last[strings.Index(last, "→")+len("→"):]; fmt.Sprint(res.summary["procs"]) != want || res.summary["changes"] != float64(len(tc.sizes)) {
				t.Errorf("summary %v, want %s processes at the end and %d changes", res.summary, want, len(tc.sizes))
			}
		})
	}
}

// TestExternalTrigger: changes sent by a tool (as dynrc does) while the
// job runs; --wait-changes keeps the job going until both have ended, so
// the test does not race the computation.
func TestExternalTrigger(t *testing.T) {
	const nx, ny, steps = 48, 40, 100
	h := startHeatDVM(t, 2, 4)
	common := []string{"--nx", fmt.Sprint(nx), "--ny", fmt.Sprint(ny), "--steps", fmt.Sprint(steps), "--check", "3"}
	args := append(common, "--trigger", "external", "--wait-changes", "2")
	job, out := h.launch(t, 3, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, req := range []wire.RCRequest{
		{Job: job, Type: wire.RCAdd, N: 2, Wait: true},
		{Job: job, Type: wire.RCSub, Ranks: wire.RangesOf([]uint32{1, 3}), Wait: true},
	} {
		rc, err := h.c.RequestRC(ctx, req)
		if err != nil || rc.Status != wire.RCFinalized {
			t.Fatalf("%s %d %s: %s %v", req.Type, req.N, req.Ranks, rc.Status, err)
		}
	}
	res := h.collect(t, job, out, args)
	if d, err := MaxDiff(serial(nx, ny, steps), res.grid); err != nil || d > 1e-12 {
		t.Errorf("final grid differs from the serial computation by %g (%v)", d, err)
	}
	if len(res.changes) != 2 || res.changes[0]["to"] != 5.0 || res.changes[1]["to"] != 3.0 || res.summary["procs"] != 3.0 {
		t.Errorf("changes %v, summary %v", res.changes, res.summary)
	}
}
