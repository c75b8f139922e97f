package proc

import (
	"context"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func benchStart(b *testing.B, spec Spec, opts startOpts) {
	ctx := context.Background()
	for b.Loop() {
		p, err := start(ctx, spec, opts)
		if err != nil {
			b.Fatal(err)
		}
		if st := p.Wait(); !st.Success() {
			b.Fatal(st)
		}
	}
}

// BenchmarkStartWaitTrue is the launch cost a daemon pays per process:
// start /bin/true through the spawner thread and wait for it (output to
// /dev/null).
func BenchmarkStartWaitTrue(b *testing.B) {
	benchStart(b, Spec{Path: "/bin/true"}, startOpts{})
}

// BenchmarkStartWaitTrueOutput adds the stdout/stderr pipes and readers.
func BenchmarkStartWaitTrueOutput(b *testing.B) {
	benchStart(b, Spec{Path: "/bin/true", Output: func(int, []byte) {}}, startOpts{})
}

// BenchmarkStartWaitTruePATH resolves "true" through PATH.
func BenchmarkStartWaitTruePATH(b *testing.B) {
	benchStart(b, Spec{Path: "true", Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}, startOpts{})
}

// BenchmarkStartWaitTrueDirect forks on the calling thread (unsafe with
// Pdeathsig, see the package doc): the price of the spawner hand-off.
func BenchmarkStartWaitTrueDirect(b *testing.B) {
	benchStart(b, Spec{Path: "/bin/true"}, startOpts{direct: true})
}

// BenchmarkStartWaitTrueNoPidfd waits in a blocking waitid instead of the
// poller.
func BenchmarkStartWaitTrueNoPidfd(b *testing.B) {
	benchStart(b, Spec{Path: "/bin/true"}, startOpts{noPidfd: true})
}

// BenchmarkExecCommandTrue is the os/exec baseline.
func BenchmarkExecCommandTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchBurst starts n × /bin/true from `workers` goroutines at once and
// waits for all of them: a daemon's share of a launch, without the wire.
func benchBurst(b *testing.B, n, workers int, spec Spec) {
	ctx := context.Background()
	self0, kids0 := cpuTimes(b)
	for b.Loop() {
		var wg sync.WaitGroup
		next := atomic.Int32{}
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for int(next.Add(1)) <= n {
					p, err := Start(ctx, spec)
					if err != nil {
						b.Error(err)
						return
					}
					defer p.Wait()
				}
			}()
		}
		wg.Wait()
	}
	self1, kids1 := cpuTimes(b)
	procs := float64(b.N * n)
	b.ReportMetric(float64(self1-self0)/procs/1e3, "parent-µs/proc")
	b.ReportMetric(float64(kids1-kids0)/procs/1e3, "child-µs/proc")
}

// cpuTimes returns the CPU time (user+system) used so far by this process
// and by its reaped children.
func cpuTimes(b *testing.B) (self, children time.Duration) {
	var ru syscall.Rusage
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if who == syscall.RUSAGE_SELF {
			self = d
		} else {
			children = d
		}
	}
	return self, children
}

// BenchmarkBurst28Serial forks 28 × /bin/true one after another (waits at
// the end), as the daemon did with a single spawner thread.
func BenchmarkBurst28Serial(b *testing.B) { benchBurst(b, 28, 1, Spec{Path: "/bin/true"}) }

// BenchmarkBurst28Pool forks them from Spawners() goroutines at once.
func BenchmarkBurst28Pool(b *testing.B) { benchBurst(b, 28, Spawners(), Spec{Path: "/bin/true"}) }

// BenchmarkBurst28PoolOutput adds stdout/stderr pipes, as with forwarded
// output.
func BenchmarkBurst28PoolOutput(b *testing.B) {
	benchBurst(b, 28, Spawners(), Spec{Path: "/bin/true", Output: func(int, []byte) {}})
}
