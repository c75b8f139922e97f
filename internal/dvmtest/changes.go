package dvmtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// Launch starts a job through c and kills it (and waits for it) in t's
// cleanup, so that a failing test leaves no process behind.
func Launch(ctx context.Context, t testing.TB, c *tool.Client, req wire.JobLaunchReq) string {
	t.Helper()
	rep, err := c.Launch(ctx, req)
	if err != nil {
		t.Fatalf("launch %v: %v", req.Argv, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.KillJob(ctx, rep.Job, 0, 0)
		_, _ = c.WaitJob(ctx, rep.Job)
	})
	return rep.Job
}

// Roles is what one change of a job of malleable test programs should show
// in their output (internal/malleable's words): the ranks that report it
// FINALIZED (STATE), that it removes (LEFT) and that it started (CONFIRMED).
type Roles struct{ Took, Left, Confirmed []uint32 }

// CheckChanges checks the output of a job whose ranks run programs that
// print internal/malleable's lines: every change of want, by delta, is
// reported FINALIZED by exactly the ranks of Took, all with the same set
// version, and left and confirmed by the ranks of Left and Confirmed. A
// STATE line carries the job data ("jobsize") exactly when lib/session
// printed it; session says which ranks run internal/malleable.
func CheckChanges(t testing.TB, lines []Line, want map[string]Roles, session func(rank uint32) bool) {
	t.Helper()
	for delta, w := range want {
		versions := map[string][]uint32{}
		var got Roles
		for _, l := range lines {
			if l.Str("delta") != delta {
				continue
			}
			switch l.Word {
			case "STATE":
				if _, s := l.Attrs["jobsize"]; s != session(l.Rank) {
					t.Errorf("%s: rank %d ran the wrong program: %v", delta, l.Rank, l.Attrs)
				}
				if l.Str("status") != wire.RCFinalized {
					t.Errorf("%s: rank %d reports %s", delta, l.Rank, l.Str("status"))
				}
				got.Took = append(got.Took, l.Rank)
				v := fmt.Sprintf("%s@%d", l.Str("set"), l.Num("version"))
				versions[v] = append(versions[v], l.Rank)
			case "LEFT":
				got.Left = append(got.Left, l.Rank)
			case "CONFIRMED":
				got.Confirmed = append(got.Confirmed, l.Rank)
			}
		}
		for _, s := range [][]uint32{got.Took, got.Left, got.Confirmed} {
			slices.Sort(s)
		}
		if len(versions) != 1 {
			t.Errorf("%s: the processes continue with different sets: %v", delta, versions)
		}
		if !slices.Equal(got.Took, w.Took) || !slices.Equal(got.Left, w.Left) || !slices.Equal(got.Confirmed, w.Confirmed) {
			t.Errorf("%s: STATE from %v (want %v), LEFT %v (want %v), CONFIRMED %v (want %v)",
				delta, got.Took, w.Took, got.Left, w.Left, got.Confirmed, w.Confirmed)
		}
	}
}

// CheckDone checks that exactly the ranks of want printed DONE.
func CheckDone(t testing.TB, lines []Line, want ...uint32) {
	t.Helper()
	var done []uint32
	for _, l := range lines {
		if l.Word == "DONE" {
			done = append(done, l.Rank)
		}
	}
	slices.Sort(done)
	if !slices.Equal(done, want) {
		t.Errorf("DONE from %v, want %v", done, want)
	}
}

// MixedJob runs a job of 4 ranks whose even ranks run one client
// implementation and whose odd ranks run internal/malleable (built with
// progs) on a DVM of 2 nodes, through the changes a job of two
// implementations must survive, and checks its output: an ADD of 2 (rank 4
// even, 5 odd), a SUB of ranks 2 and 3, a REPLACE of the even root 0 by
// rank 6 (so an even rank is the root of the first three and speaks for
// the odd members), and an ADD of 1 whose root is the odd rank 1; the
// confirm fences mix both programs. Every process must see every change it
// takes part in FINALIZED with the same set version, the removed and
// replaced ones leave, and the job ends well. argv gets the path of
// internal/malleable and returns the job's command, which must run it in
// the odd ranks with "-last 4".
func MixedJob(t *testing.T, progs *Programs, name string, argv func(malleable string) []string) {
	t.Helper()
	mall := progs.Build(t, "github.com/dynrt/dynrt/internal/malleable")
	d := Start(t, Options{Nodes: 2, Slots: 6})
	c := d.Attach(t)
	out := CollectOutput(c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job := Launch(ctx, t, c, wire.JobLaunchReq{
		Argv: argv(mall), N: 4, Env: d.Env, Name: name, Output: wire.OutputFlags{Forward: true},
	})
	var deltas []string
	for _, req := range []wire.RCRequest{
		{Type: wire.RCAdd, N: 2},
		{Type: wire.RCSub, Ranks: wire.Span(2, 3)},
		{Type: wire.RCReplace, Ranks: wire.Span(0, 0)},
		{Type: wire.RCAdd, N: 1},
	} {
		req.Job, req.Queue = job, true // each after the one before has settled
		deltas = append(deltas, RequestRC(ctx, t, c, req).Delta)
	}
	end := WaitJob(t, c, job, 60*time.Second)
	lines := ParseLines(t, out.Lines(job))
	if end.State != wire.JobStateDone {
		t.Fatalf("job ended %s: %s\n%v", end.State, end.Msg, lines)
	}
	CheckChanges(t, lines, map[string]Roles{
		deltas[0]: {Took: []uint32{0, 1, 2, 3, 4, 5}, Confirmed: []uint32{4, 5}},
		deltas[1]: {Took: []uint32{0, 1, 4, 5}, Left: []uint32{2, 3}},
		deltas[2]: {Took: []uint32{1, 4, 5, 6}, Left: []uint32{0}, Confirmed: []uint32{6}},
		deltas[3]: {Took: []uint32{1, 4, 5, 6, 7}, Confirmed: []uint32{7}},
	}, func(r uint32) bool { return r%2 == 1 })
	CheckDone(t, lines, 1, 4, 5, 6, 7)
}

// RequestRC asks for a change, again while the job's first processes are
// still being launched (a change cannot be requested then), and returns
// its record once it has started (a queued request is answered at once,
// before it has a delta: tool.Client.WaitQueued); an error fails t.
func RequestRC(ctx context.Context, t testing.TB, c *tool.Client, req wire.RCRequest) wire.RC {
	t.Helper()
	rc, err := c.RequestRC(ctx, req)
	for errors.Is(err, wire.ErrState) && strings.Contains(err.Error(), "still being launched") && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		rc, err = c.RequestRC(ctx, req)
	}
	if err == nil {
		rc, err = c.WaitQueued(ctx, rc)
	}
	if err != nil {
		t.Fatalf("request %s: %v", req.Type, err)
	}
	return rc
}
