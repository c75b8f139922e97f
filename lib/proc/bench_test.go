package proc

import (
	"context"
	"os/exec"
	"testing"
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
