package rawclient_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// TestMixedImplementations runs one job whose ranks use two client
// implementations of phase 3 — the even ranks internal/rawclient/rawrank
// (raw frames), the odd ones internal/malleable (lib/session) — through an
// ADD, a SUB, a REPLACE and another ADD. The raw rank 0 is the root of the
// first three (its set operations and accept speak for lib/session
// members), the lib/session rank 1 the root of the last one; the confirm
// fences mix both kinds of new processes. Every process must see every
// change it takes part in FINALIZED with the same set version, the
// removed and replaced ones leave, and the job ends well.
func TestMixedImplementations(t *testing.T) {
	raw := progs.Build(t, "github.com/dynrt/dynrt/internal/rawclient/rawrank")
	mall := progs.Build(t, "github.com/dynrt/dynrt/internal/malleable")
	d := dvmtest.Start(t, dvmtest.Options{Nodes: 2, Slots: 6})
	c := d.Attach(t)
	out := dvmtest.CollectOutput(c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const last = "4"
	rep, err := c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{raw, "-session", mall, "-last", last, "-timeout", "60s", "--", "-last", last, "-timeout", "60s"},
		N:    4, Env: d.Env, Name: "mix", Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	job := rep.Job
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.KillJob(ctx, job, 0, 0)
		_, _ = c.WaitJob(ctx, job)
	})
	changes := []wire.RCRequest{
		{Type: wire.RCAdd, N: 2},                       // 1: ranks 4 (raw) and 5 (lib/session)
		{Type: wire.RCSub, Ranks: wire.Span(2, 3)},     // 2: ranks 2 (raw) and 3 (lib/session) leave
		{Type: wire.RCReplace, Ranks: wire.Span(0, 0)}, // 3: the raw root 0 is replaced by rank 6 (raw)
		{Type: wire.RCAdd, N: 1},                       // 4: rank 7 (lib/session); rank 1 is the root
	}
	var deltas []string
	for _, req := range changes {
		req.Job, req.Queue = job, true // each after the one before has settled
		rc, err := c.RequestRC(ctx, req)
		for errors.Is(err, wire.ErrState) && strings.Contains(err.Error(), "still being launched") && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			rc, err = c.RequestRC(ctx, req)
		}
		if err != nil {
			t.Fatalf("request %s: %v", req.Type, err)
		}
		deltas = append(deltas, rc.Delta)
	}
	end := dvmtest.WaitJob(t, c, job, 60*time.Second)
	lines := dvmtest.ParseLines(t, out.Lines(job))
	if end.State != wire.JobStateDone {
		t.Fatalf("job ended %s: %s\n%v", end.State, end.Msg, lines)
	}

	// Who took part in which change, and how it ended for them.
	took := map[string][]uint32{
		deltas[0]: {0, 1, 2, 3, 4, 5},
		deltas[1]: {0, 1, 4, 5},
		deltas[2]: {1, 4, 5, 6},
		deltas[3]: {1, 4, 5, 6, 7},
	}
	left := map[string][]uint32{deltas[1]: {2, 3}, deltas[2]: {0}}
	confirmed := map[string][]uint32{deltas[0]: {4, 5}, deltas[2]: {6}, deltas[3]: {7}}
	for _, delta := range deltas {
		versions := map[string][]uint32{}
		var got, gone, conf []uint32
		for _, l := range lines {
			if l.Str("delta") != delta {
				continue
			}
			switch l.Word {
			case "STATE":
				// internal/malleable's lines carry the job data, rawrank's do
				// not: the odd ranks did run on lib/session.
				if _, session := l.Attrs["jobsize"]; session != (l.Rank%2 == 1) {
					t.Errorf("%s: rank %d ran the wrong program: %v", delta, l.Rank, l.Attrs)
				}
				if l.Str("status") != wire.RCFinalized {
					t.Errorf("%s: rank %d reports %s", delta, l.Rank, l.Str("status"))
				}
				got = append(got, l.Rank)
				v := fmt.Sprintf("%s@%d", l.Str("set"), l.Num("version"))
				versions[v] = append(versions[v], l.Rank)
			case "LEFT":
				gone = append(gone, l.Rank)
			case "CONFIRMED":
				conf = append(conf, l.Rank)
			}
		}
		for _, s := range [][]uint32{got, gone, conf} {
			slices.Sort(s)
		}
		if len(versions) != 1 {
			t.Errorf("%s: the processes continue with different sets: %v", delta, versions)
		}
		if !slices.Equal(got, took[delta]) || !slices.Equal(gone, left[delta]) || !slices.Equal(conf, confirmed[delta]) {
			t.Errorf("%s: STATE from %v (want %v), LEFT %v (want %v), CONFIRMED %v (want %v)",
				delta, got, took[delta], gone, left[delta], conf, confirmed[delta])
		}
	}
	var done []uint32
	for _, l := range lines {
		if l.Word == "DONE" {
			done = append(done, l.Rank)
		}
	}
	slices.Sort(done)
	if want := []uint32{1, 4, 5, 6, 7}; !slices.Equal(done, want) {
		t.Errorf("DONE from %v, want %v", done, want)
	}
}
