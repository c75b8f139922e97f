package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes (see
// internal/dvmtest); spawnbench itself is built once per run (by progs) into a
// temporary directory that TestMain removes.
var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// TestSmoke runs the dynrt side of the benchmark on two virtual nodes (so
// that grows and communicators span nodes): k = 1, 2 with two rounds each
// and a rate run of two grows, then the same with a non-blocking accept. It
// checks every line rank 0 prints: each grow ended in a barrier over a
// communicator of k+1 processes, the steps are in order, and the job
// shrank back to one.
func TestSmoke(t *testing.T) {
	bin := progs.Build(t, "github.com/dynrt/dynrt/examples/spawnbench")
	d := dvmtest.Start(t, dvmtest.Options{Nodes: 2, Slots: 2, Name: "spawnbench"})
	c := d.Attach(t)
	output := dvmtest.CollectOutput(c)
	for _, tc := range []struct {
		name   string
		args   []string
		rounds map[int]string // k → the rounds its lines must show
		rate   int            // grows of the rate run (0: none)
	}{
		{"blocking", []string{"-k", "1,2", "-rounds", "2", "-rate", "2"}, map[int]string{1: "[0 1]", 2: "[0 1]"}, 2},
		{"nonblocking", []string{"-blocking=false", "-k", "2", "-rounds", "1", "-rate", "0"}, map[int]string{2: "[0]"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			rep, err := c.Launch(ctx, wire.JobLaunchReq{
				Argv: append([]string{bin, "-warmup", "0", "-timeout", "80s"}, tc.args...),
				N:    1, Env: d.Env, Output: wire.OutputFlags{Forward: true},
			})
			if err != nil {
				t.Fatalf("launch: %v", err)
			}
			end, err := c.WaitJob(ctx, rep.Job)
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			var out []string
			for _, l := range output.Lines(rep.Job) {
				if l.Stream == wire.StreamStderr || l.Rank != 0 {
					t.Errorf("rank %d, stream %d: %s", l.Rank, l.Stream, l.Line)
					continue
				}
				out = append(out, string(l.Line))
			}
			if end.State != wire.JobStateDone || end.Code != 0 {
				t.Fatalf("job ended %s with code %d (%s); output:\n%s", end.State, end.Code, end.Msg, strings.Join(out, "\n"))
			}
			checkLines(t, out, tc.rounds, tc.rate)
		})
	}
}

// checkLines checks rank 0's output: ROUND lines for exactly the rounds
// wanted, one RATE line with rate grows (none for 0), one DONE line.
func checkLines(t *testing.T, out []string, want map[int]string, wantRate int) {
	t.Helper()
	rounds := map[int][]int{} // k → rounds seen
	var rate, done int
	for _, l := range out {
		word, js, _ := strings.Cut(l, " ")
		var v struct {
			Impl  string           `json:"impl"`
			K     int              `json:"k"`
			Round int              `json:"round"`
			N     int              `json:"n"`
			NS    int64            `json:"ns"`
			Size  int              `json:"size"`
			Steps map[string]int64 `json:"steps"`
		}
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Errorf("line %q: %v", l, err)
			continue
		}
		if v.Impl != "dynrt" {
			t.Errorf("line %q: impl %q", l, v.Impl)
		}
		switch word {
		case "ROUND":
			rounds[v.K] = append(rounds[v.K], v.Round)
			if v.Size != v.K+1 {
				t.Errorf("grow by %d: communicator of %d processes, want %d", v.K, v.Size, v.K+1)
			}
			if v.NS <= 0 || v.Steps["r0_barrier"] != v.NS {
				t.Errorf("grow by %d: ns %d, barrier step %d", v.K, v.NS, v.Steps["r0_barrier"])
			}
			// Causality across processes and the master (one host, one clock).
			order := []string{"m_announced", "new_main", "new_init", "new_confirm", "new_barrier"}
			for i := 1; i < len(order); i++ {
				if a, b := v.Steps[order[i-1]], v.Steps[order[i]]; a <= 0 || b < a {
					t.Errorf("grow by %d: step %s at %d, %s at %d", v.K, order[i-1], a, order[i], b)
				}
			}
			if v.Steps["m_started"] <= 0 || v.Steps["m_confirmed"] > v.Steps["r0_accepted"] {
				t.Errorf("grow by %d: started at %d; accept returned at %d, confirmation at %d", v.K, v.Steps["m_started"], v.Steps["r0_accepted"], v.Steps["m_confirmed"])
			}
		case "RATE":
			rate++
			if v.N != wantRate || v.Size != wantRate+1 || v.NS <= 0 {
				t.Errorf("rate line %q: want n %d, size %d", l, wantRate, wantRate+1)
			}
		case "DONE":
			done++
			if v.Size != 1 {
				t.Errorf("done with a communicator of %d processes, want 1", v.Size)
			}
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	for k, w := range want {
		if got := fmt.Sprint(rounds[k]); got != w {
			t.Errorf("grow by %d: rounds %s, want %s", k, got, w)
		}
	}
	if len(rounds) != len(want) {
		t.Errorf("grows by %v, want %v", rounds, want)
	}
	if wantRate := min(wantRate, 1); rate != wantRate || done != 1 {
		t.Errorf("%d RATE and %d DONE lines, want %d and 1; output:\n%s", rate, done, wantRate, strings.Join(out, "\n"))
	}
}
