package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// TestMixedWithC: one job whose even ranks run examples/c-synthetic and
// whose odd ranks run this benchmark with --exchange kv (or the other way
// round, so that the root is Go once and C once), with the non-blocking
// accept, so that the PENDING rounds of an ADD mix both programs too.
// External: grown by an ADD of 2 (one new rank of each) and shrunk by a
// SUB of 1 from a tool (what dynrc add and sub send). App: the Go root
// grows the job 2 → 4 itself by ADDs of 1 (a Go rank, then a C rank).
// Every iteration must count the exact work result with the processes the
// changes give, the changes must end FINALIZED with their step times, and
// the job must end well.
func TestMixedWithC(t *testing.T) {
	cdir := progs.BuildC(t) // skips without cc or msgpack-c
	cprog := filepath.Join(cdir, "c-synthetic")
	goprog := progs.Build(t, "github.com/dynrt/dynrt/examples/synthetic") + " --exchange kv"
	d := startDVM(t, 2, 3)
	const problem = 100000
	external := []string{"--trigger", "external", "--changes", "2"}
	tool := []wire.RCRequest{{Type: wire.RCAdd, N: 2}, {Type: wire.RCSub, N: 1}}
	for _, tc := range []struct {
		name, even, odd string
		args            []string
		requests        []wire.RCRequest // from the tool, in order
		want            []change
		final           int
	}{
		{"c-root", cprog, goprog, external, tool, []change{{wire.RCAdd, 2}, {wire.RCSub, 1}}, 3},
		{"go-root", goprog, cprog, external, tool, []change{{wire.RCAdd, 2}, {wire.RCSub, 1}}, 3},
		{"go-root-app", goprog, cprog, []string{"--limit", "4", "--delta", "1", "-f", "2"}, nil,
			[]change{{wire.RCAdd, 1}, {wire.RCAdd, 1}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pick := `if [ $((DYNRT_RANK % 2)) -eq 0 ]; then exec ` + tc.even + ` "$@"; else exec ` + tc.odd + ` "$@"; fi`
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			job := dvmtest.Launch(ctx, t, d.c, wire.JobLaunchReq{
				Argv: append([]string{"/bin/sh", "-c", pick, "mixed", "-i", "6", "--start", "2", "--problem-size", fmt.Sprint(problem)},
					tc.args...),
				N: 2, Env: d.d.Env, Output: wire.OutputFlags{Forward: true},
			})
			for _, req := range tc.requests {
				req.Job, req.Queue = job, true
				dvmtest.RequestRC(ctx, t, d.c, req)
			}
			d.t = t
			run := checkRun(t, d.wait(job), 2, problem, tc.want)
			if run.End.FinalProcs != tc.final {
				t.Errorf("ended with %d processes, want %d", run.End.FinalProcs, tc.final)
			}
		})
	}
}
