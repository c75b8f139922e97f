package dvmtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

func TestMain(m *testing.M) { Main(m, nil) }

// TestStart starts a DVM of two nodes (one re-executed daemon) and runs a
// marked job on it; the cleanup checks that nothing is left.
func TestStart(t *testing.T) {
	d := Start(t, Options{Nodes: 2, Slots: 1, Name: "dvmtest", SetEnv: true})
	if got := os.Getenv("DYNRT_DIR"); got != d.Dir {
		t.Errorf("$DYNRT_DIR = %q, want %q", got, d.Dir)
	}
	c := d.Attach(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(st.Nodes))
	}
	if st.Nodes[0].PID != os.Getpid() || st.Nodes[1].PID == os.Getpid() {
		t.Errorf("node PIDs %d, %d: want this process for node0 only", st.Nodes[0].PID, st.Nodes[1].PID)
	}
}

// TestOutput launches two processes that each print a `WORD {json}` line
// and checks what Output, WaitJob and ParseLines make of them.
func TestOutput(t *testing.T) {
	p := &Programs{Race: Race}
	defer p.Cleanup()
	exe := p.Build(t, helloPkg)
	d := Start(t, Options{Nodes: 1, Slots: 2})
	c := d.Attach(t)
	out := CollectOutput(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{exe}, N: 2, Env: d.Env, Output: wire.OutputFlags{Forward: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !out.WaitFor(rep.Job, 20*time.Second, func(ls []wire.OutputLine) bool { return len(ls) == 2 }) {
		t.Fatalf("no two lines: %v", out.Lines(rep.Job))
	}
	if end := WaitJob(t, c, rep.Job, 20*time.Second); end.State != wire.JobStateDone || end.Code != 0 {
		t.Errorf("job ended %s with code %d", end.State, end.Code)
	}
	if out.WaitFor(rep.Job, 10*time.Millisecond, func(ls []wire.OutputLine) bool { return len(ls) > 2 }) {
		t.Errorf("more than two lines: %v", out.Lines(rep.Job))
	}
	ranks := map[uint32]bool{}
	for _, l := range ParseLines(t, out.Lines(rep.Job)) {
		ranks[l.Rank] = true
		if l.Word != "HELLO" || l.Num("n") != 1 || l.Str("s") != "x" || l.Str("n") != "" || l.Num("s") != 0 {
			t.Errorf("parsed %+v", l)
		}
	}
	if len(ranks) != 2 {
		t.Errorf("lines of ranks %v, want 0 and 1", ranks)
	}
}

// errRecorder is a testing.TB that records Errorf instead of failing.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Helper() {}
func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestParseLines(t *testing.T) {
	tests := []struct {
		name  string
		in    wire.OutputLine
		words []string
		errs  int
	}{
		{"word and json", wire.OutputLine{Rank: 3, Line: []byte(`DONE {"k":2}`)}, []string{"DONE"}, 0},
		{"stderr", wire.OutputLine{Stream: wire.StreamStderr, Line: []byte(`DONE {}`)}, nil, 1},
		{"not json", wire.OutputLine{Line: []byte("DONE soon")}, nil, 1},
		{"no json", wire.OutputLine{Line: []byte("DONE")}, nil, 1},
		{"error line", wire.OutputLine{Line: []byte(`ERROR {"err":"x"}`)}, []string{"ERROR"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &errRecorder{TB: t}
			var words []string
			for _, l := range ParseLines(r, []wire.OutputLine{tc.in}) {
				words = append(words, l.Word)
				if l.Rank != tc.in.Rank {
					t.Errorf("rank %d, want %d", l.Rank, tc.in.Rank)
				}
			}
			if fmt.Sprint(words) != fmt.Sprint(tc.words) || len(r.errs) != tc.errs {
				t.Errorf("words %v and errors %q, want %v and %d errors", words, r.errs, tc.words, tc.errs)
			}
		})
	}
}
