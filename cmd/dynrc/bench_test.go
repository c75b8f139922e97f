package main

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
)

// BenchmarkRC times ADD and SUB of 1, 8 and 28 processes of a 28-process
// malleable job on a 4 x 28-slot virtual DVM (issue item 8), through dynrc
// as an operator runs it: `dynrc add|sub -n N --wait`. ns/op is dynrc's
// wall time until the change is settled; the other metrics are medians of
// the master's step timestamps, in ms from the request: announced,
// all-started (ADD), pending (first accept), finalized, exited (SUB).
// Between timed changes the job is brought back to 28 processes untimed,
// so ADD and SUB alternate.
//
//	go test -run '^$' -bench RC -benchtime 10x ./cmd/dynrc/
func BenchmarkRC(b *testing.B) {
	d := startDVM(b, 4, 28)
	if malleableBin == "" {
		b.Skip("no malleable test program")
	}
	d.launch("bench", 28, malleableBin, "-timeout", "1h")
	d.must(0, "add", "-n", "1", "--wait") // warm-up
	d.must(0, "sub", "-n", "1", "--wait")
	for _, n := range []int{1, 8, 28} {
		for _, typ := range []string{"add", "sub"} {
			undo := map[string]string{"add": "sub", "sub": "add"}[typ]
			b.Run(typ+"-"+strconv.Itoa(n), func(b *testing.B) {
				d := &testDVM{t: b, id: d.id, dir: d.dir} // failures belong to the sub-benchmark
				steps := map[string][]float64{}
				for b.Loop() {
					if typ == "sub" {
						b.StopTimer()
						d.must(0, "add", "-n", strconv.Itoa(n), "--wait")
						b.StartTimer()
					}
					out := d.must(0, typ, "-n", strconv.Itoa(n), "--wait", "--json")
					b.StopTimer()
					var rec rcJSON
					if err := json.Unmarshal([]byte(out), &rec); err != nil {
						b.Fatal(err)
					}
					for k, v := range rec.ElapsedMS {
						steps[k] = append(steps[k], v)
					}
					if typ == "add" {
						d.must(0, undo, "-n", strconv.Itoa(n), "--wait")
					}
					b.StartTimer()
				}
				for _, m := range []struct{ step, unit string }{
					{"announced", "announced-ms"}, {"all_started", "started-ms"}, {"accept_published", "pending-ms"},
					{"finalized", "finalized-ms"}, {"all_exited", "exited-ms"},
				} {
					if v := steps[m.step]; len(v) > 0 {
						b.ReportMetric(median(v), m.unit)
					}
				}
			})
		}
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
