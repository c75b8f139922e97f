package master

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// benchLaunch measures a launch of n × /bin/true on a warm DVM of 4
// virtual nodes with n/4 slots each, through lib/tool: job.launch, then
// job.wait until every process has been reaped and reported. It is the
// issue's warm-DVM benchmark minus the start of the dynrun process.
func benchLaunch(b *testing.B, n int) {
	d := startDVM(b, 4, n/4)
	ctx := context.Background()
	req := wire.JobLaunchReq{Argv: []string{"/bin/true"}, N: uint32(n), Env: d.env, Output: wire.OutputFlags{Forward: os.Getenv("NOFWD") == ""}}
	for b.Loop() {
		rep, err := d.c.Launch(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		end, err := d.c.WaitJob(ctx, rep.Job)
		if err != nil || end.State != wire.JobStateDone {
			b.Fatalf("%+v %v", end, err)
		}
	}
}

func BenchmarkLaunchTrue8(b *testing.B)   { benchLaunch(b, 8) }
func BenchmarkLaunchTrue28(b *testing.B)  { benchLaunch(b, 28) }
func BenchmarkLaunchTrue112(b *testing.B) { benchLaunch(b, 112) }

// BenchmarkDaemonIdleRSS reports the resident memory of an idle daemon
// process (a re-executed test binary, so a little larger than `dynrun
// daemon`) after it has run a few jobs. The loop only samples.
func BenchmarkDaemonIdleRSS(b *testing.B) {
	d := startDVM(b, 2, 8)
	ctx := context.Background()
	for range 5 {
		rep, err := d.c.Launch(ctx, wire.JobLaunchReq{Argv: []string{"/bin/true"}, N: 16, Env: d.env})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.c.WaitJob(ctx, rep.Job); err != nil {
			b.Fatal(err)
		}
	}
	st, err := d.c.State(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var kib int
	for b.Loop() {
		kib = rssKiB(b, st.Nodes[1].PID)
	}
	b.ReportMetric(float64(kib)/1024, "MiB-RSS")
}

func rssKiB(b *testing.B, pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkPrivateTrue8 is a private DVM's whole life inside one process,
// as `dynrun -n 8 /bin/true` without --dvm runs it: start a one-node DVM
// (daemon in-process), attach, launch and wait 8 × /bin/true, stop.
func BenchmarkPrivateTrue8(b *testing.B) {
	base := filepath.Join(b.TempDir(), "d")
	ctx := context.Background()
	env := os.Environ()
	for b.Loop() {
		m, err := Start(ctx, Config{Dir: base, Nodes: []alloc.Node{{Name: "n0", Slots: 8}}, Private: true, Env: func(string) string { return "" }})
		if err != nil {
			b.Fatal(err)
		}
		c, err := tool.Dial(ctx, m.Info(), tool.Options{Name: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{"/bin/true"}, N: 8, Env: env, Output: wire.OutputFlags{Forward: true}})
		if err != nil {
			b.Fatal(err)
		}
		if end, err := c.WaitJob(ctx, rep.Job); err != nil || end.State != wire.JobStateDone {
			b.Fatalf("%+v %v", end, err)
		}
		c.Close()
		if err := m.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// benchGrow measures `dvm grow` by one virtual node of 2 slots on a warm
// DVM whose node 0 is full (a sleeping process holds its slot): from the
// request until the reply, when the node's slots are placeable, and with
// use, until a job of 2 × /bin/true has run on them. The shrink that takes
// the node out again is not timed. The daemon is the test binary
// re-executed (a little larger than `dynrun daemon`).
func benchGrow(b *testing.B, use bool) {
	d := startDVM(b, 1, 1)
	ctx := context.Background()
	if _, err := d.c.Launch(ctx, wire.JobLaunchReq{Argv: []string{"sleep", "600"}, N: 1, Env: d.env}); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		name := "g" + strconv.Itoa(i)
		if _, err := d.c.Grow(ctx, wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: name, Slots: 2}}}); err != nil {
			b.Fatal(err)
		}
		if use {
			rep, err := d.c.Launch(ctx, wire.JobLaunchReq{Argv: []string{"/bin/true"}, N: 2, Env: d.env})
			if err != nil {
				b.Fatal(err)
			}
			if end, err := d.c.WaitJob(ctx, rep.Job); err != nil || end.State != wire.JobStateDone {
				b.Fatalf("%+v %v", end, err)
			}
		}
		b.StopTimer()
		if _, err := d.c.Shrink(ctx, wire.DVMShrinkReq{Node: name}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkGrowOneNode(b *testing.B)       { benchGrow(b, false) }
func BenchmarkGrowOneNodeAndUse(b *testing.B) { benchGrow(b, true) }
