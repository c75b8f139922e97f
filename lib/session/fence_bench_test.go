package session_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// BenchmarkFence28 and BenchmarkFence112 measure a fence over the whole
// job on 4 virtual nodes × 28 slots, with the job spread round-robin over
// the nodes (7 and 28 processes per node): the sizes of the resource
// change benchmarks, where several processes of a node enter each fence.
// ns/fence is measured inside the application (rank 0, after a warm-up
// fence); ns/op also carries the launch, spread over b.N fences.
func BenchmarkFence28(b *testing.B)  { benchFence(b, 28) }
func BenchmarkFence112(b *testing.B) { benchFence(b, 112) }

func benchFence(b *testing.B, n int) {
	d := startDVM(b, 4, 28)
	b.ResetTimer()
	_, lines := d.run(n, wire.MapByNode, "fencebench", strconv.Itoa(b.N))
	b.StopTimer()
	var k, ns float64
	if len(lines[0]) != 1 {
		b.Fatalf("rank 0 printed %q", lines[0])
	}
	if _, err := fmt.Sscanf(lines[0][0], "fencebench %g %g", &k, &ns); err != nil {
		b.Fatalf("%q: %v", lines[0][0], err)
	}
	b.ReportMetric(ns/k, "ns/fence")
}
