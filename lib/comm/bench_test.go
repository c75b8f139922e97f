package comm_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// Benchmarks run commapp -mode bench on a DVM of 4 virtual nodes × 8
// slots: rank 0 times b.N operations (after a warm-up) and the figure it
// prints replaces ns/op, so DVM and process start-up are not counted.
// Rerun with:
//
//	flock /tmp/dynrt-bench.lock go test -run '^$' -bench . -benchtime 2000x ./lib/comm

func benchApp(b *testing.B, d *testDVM, n int, mapBy string, args ...string) {
	b.Helper()
	args = append([]string{"-mode", "bench", "-n", strconv.Itoa(b.N)}, args...)
	ls := only(d.run(n, mapBy, args...), "BENCH")
	if len(ls) != 1 {
		b.Fatalf("%d BENCH lines", len(ls))
	}
	b.ReportMetric(float64(ls[0].Num("ns")), "ns/op")
}

// BenchmarkPingPong: one round trip of 8 bytes between two processes on
// two virtual nodes of this host, over unix sockets and over TCP.
func BenchmarkPingPong(b *testing.B) {
	d := startDVM(b, 4, 8)
	for _, tcp := range []bool{false, true} {
		name := "unix"
		args := []string{"-bench", "pingpong"}
		if tcp {
			name = "tcp"
			args = append(args, "-tcp")
		}
		b.Run(name, func(b *testing.B) {
			d.t = b
			benchApp(b, d, 2, wire.MapByNode, args...)
		})
	}
}

// BenchmarkBarrier and BenchmarkAllreduce (one float64, sum) at 8 and 28
// processes spread over the four nodes.
func BenchmarkBarrier(b *testing.B)   { benchColl(b, "barrier") }
func BenchmarkAllreduce(b *testing.B) { benchColl(b, "allreduce") }

func benchColl(b *testing.B, op string) {
	d := startDVM(b, 4, 8)
	for _, n := range []int{8, 28} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			d.t = b
			benchApp(b, d, n, wire.MapBySlot, "-bench", op)
		})
	}
}
