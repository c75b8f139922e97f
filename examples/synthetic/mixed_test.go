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
// round, so that the root is Go once and C once), grown by an ADD of 2
// (one new rank of each) and shrunk by a SUB of 1 from a tool (what dynrc
// add and sub send), with the non-blocking accept, so that the PENDING
// rounds of the ADD mix both programs too. Every iteration must count the
// exact work result with the processes the changes give, and the job must
// end well.
func TestMixedWithC(t *testing.T) {
	cdir := progs.BuildC(t) // skips without cc or msgpack-c
	cprog := filepath.Join(cdir, "c-synthetic")
	goprog := progs.Build(t, "github.com/dynrt/dynrt/examples/synthetic")
	d := startDVM(t, 2, 3)
	const problem = 100000
	for _, tc := range []struct{ name, even, odd string }{
		{"c-root", cprog, goprog + " --exchange kv"},
		{"go-root", goprog + " --exchange kv", cprog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pick := `if [ $((DYNRT_RANK % 2)) -eq 0 ]; then exec ` + tc.even + ` "$@"; else exec ` + tc.odd + ` "$@"; fi`
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			job := dvmtest.Launch(ctx, t, d.c, wire.JobLaunchReq{
				Argv: []string{"/bin/sh", "-c", pick, "mixed", "--trigger", "external", "--changes", "2", "-i", "6",
					"--start", "2", "--problem-size", fmt.Sprint(problem)},
				N: 2, Env: d.d.Env, Output: wire.OutputFlags{Forward: true},
			})
			for _, req := range []wire.RCRequest{{Type: wire.RCAdd, N: 2}, {Type: wire.RCSub, N: 1}} {
				req.Job, req.Queue = job, true
				dvmtest.RequestRC(ctx, t, d.c, req)
			}
			d.t = t
			run := checkRun(t, d.wait(job), 2, problem, []change{{wire.RCAdd, 2}, {wire.RCSub, 1}})
			if run.End.FinalProcs != 3 {
				t.Errorf("ended with %d processes, want 3", run.End.FinalProcs)
			}
		})
	}
}
