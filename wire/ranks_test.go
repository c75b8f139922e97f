package wire

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

func TestRangesOf(t *testing.T) {
	tests := []struct {
		in   []uint32
		want RankRanges
		str  string
	}{
		{nil, nil, ""},
		{[]uint32{5}, RankRanges{{5, 5}}, "5"},
		{[]uint32{3, 1, 2, 2, 0}, RankRanges{{0, 3}}, "0-3"},
		{[]uint32{9, 0, 1, 7, 10, 3}, RankRanges{{0, 1}, {3, 3}, {7, 7}, {9, 10}}, "0-1,3,7,9-10"},
		{[]uint32{math.MaxUint32, 0, math.MaxUint32 - 1}, RankRanges{{0, 0}, {math.MaxUint32 - 1, math.MaxUint32}}, "0,4294967294-4294967295"},
	}
	for _, tc := range tests {
		got := RangesOf(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("RangesOf(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("String = %q, want %q", got.String(), tc.str)
		}
		if err := got.Check(); err != nil {
			t.Errorf("Check(%v): %v", got, err)
		}
	}
}

// TestRankRangesProperties: random rank sets survive ranks → ranges →
// ranks, and Add in random order gives the canonical form.
func TestRankRangesProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		n := rng.IntN(200)
		set := map[uint32]bool{}
		var ranks []uint32
		for i := 0; i < n; i++ {
			r := uint32(rng.IntN(300))
			ranks = append(ranks, r)
			set[r] = true
		}
		rr := RangesOf(ranks)
		if err := rr.Check(); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(rr); i++ {
			if rr[i].Lo == rr[i-1].Hi+1 {
				t.Fatalf("not canonical: %v", rr)
			}
		}
		if rr.Count() != len(set) {
			t.Fatalf("Count = %d, want %d", rr.Count(), len(set))
		}
		back := rr.Ranks()
		if !slices.IsSorted(back) || len(back) != len(set) {
			t.Fatalf("Ranks() = %v", back)
		}
		for r := uint32(0); r < 300; r++ {
			if rr.Contains(r) != set[r] {
				t.Fatalf("Contains(%d) = %v", r, !set[r])
			}
		}
		var shuffled RankRanges
		for _, i := range rng.Perm(len(ranks)) {
			shuffled = shuffled.Add(ranks[i])
		}
		if !slices.Equal(shuffled, rr) {
			t.Fatalf("Add in random order: %v, want %v", shuffled, rr)
		}
		// Union of the ranges of two halves of the list is the whole.
		cut := rng.IntN(len(ranks) + 1)
		lo, hi := RangesOf(ranks[:cut]), RangesOf(ranks[cut:])
		if u := lo.Union(hi); !slices.Equal(u, rr) && !(len(u) == 0 && len(rr) == 0) {
			t.Fatalf("%v ∪ %v = %v, want %v", lo, hi, u, rr)
		}
		if u := hi.Union(lo); !slices.Equal(u, rr) && !(len(u) == 0 && len(rr) == 0) {
			t.Fatalf("%v ∪ %v = %v, want %v", hi, lo, u, rr)
		}
		b, err := Marshal(rr)
		if err != nil {
			t.Fatal(err)
		}
		var dec RankRanges
		if err := Unmarshal(b, &dec); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dec, rr) {
			t.Fatalf("decode %v, want %v", dec, rr)
		}
	}
}

// TestRankRangesIntersectMinus checks Intersect and Minus against sets of
// ranks, random ones and the edges of the rank space.
func TestRankRangesIntersectMinus(t *testing.T) {
	check := func(a, b RankRanges, universe []uint32) {
		t.Helper()
		in, out := a.Intersect(b), a.Minus(b)
		for _, got := range []RankRanges{in, out} {
			if err := got.Check(); err != nil {
				t.Fatalf("%v, %v: %v", a, b, err)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Lo == got[i-1].Hi+1 {
					t.Fatalf("%v, %v: not canonical: %v", a, b, got)
				}
			}
		}
		for _, r := range universe {
			if in.Contains(r) != (a.Contains(r) && b.Contains(r)) {
				t.Fatalf("%v ∩ %v = %v: wrong about %d", a, b, in, r)
			}
			if out.Contains(r) != (a.Contains(r) && !b.Contains(r)) {
				t.Fatalf("%v − %v = %v: wrong about %d", a, b, out, r)
			}
		}
		if in.Count()+out.Count() != a.Count() {
			t.Fatalf("%v, %v: |∩| %d + |−| %d != %d", a, b, in.Count(), out.Count(), a.Count())
		}
	}
	const top = math.MaxUint32
	edges := []uint32{0, 1, 2, top - 2, top - 1, top}
	for _, c := range []struct{ a, b RankRanges }{
		{nil, nil},
		{Span(0, top), nil},
		{Span(0, top), Span(0, top)},
		{Span(0, top), Span(1, top-1)},
		{Span(0, top), RankRanges{{0, 0}, {top, top}}},
		{RankRanges{{0, 1}, {top - 1, top}}, Span(1, top-1)},
		{Span(top, top), Span(0, top-1)},
	} {
		check(c.a, c.b, edges)
		check(c.b, c.a, edges)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	universe := make([]uint32, 120)
	for i := range universe {
		universe[i] = uint32(i)
	}
	for iter := 0; iter < 500; iter++ {
		var a, b RankRanges
		for i := rng.IntN(60); i > 0; i-- {
			a = a.Add(uint32(rng.IntN(120)))
		}
		for i := rng.IntN(60); i > 0; i-- {
			b = b.Add(uint32(rng.IntN(120)))
		}
		check(a, b, universe)
	}
}

func TestRankRangesAllStopsEarly(t *testing.T) {
	rr := RankRanges{{0, math.MaxUint32}}
	n := 0
	for r := range rr.All() {
		if r != uint32(n) {
			t.Fatalf("got %d at %d", r, n)
		}
		n++
		if n == 5 {
			break
		}
	}
	if n != 5 {
		t.Fatal("iteration did not stop")
	}
	// the top rank ends its range without wrapping around
	got := slices.Collect(RankRanges{{math.MaxUint32 - 1, math.MaxUint32}}.All())
	if !slices.Equal(got, []uint32{math.MaxUint32 - 1, math.MaxUint32}) {
		t.Fatalf("got %v", got)
	}
}

func TestRankRangesDecodeRejects(t *testing.T) {
	tests := map[string][]byte{
		"reversed":     {0x91, 0x92, 0x05, 0x03},
		"overlapping":  {0x92, 0x92, 0x00, 0x05, 0x92, 0x05, 0x06},
		"unordered":    {0x92, 0x92, 0x07, 0x08, 0x92, 0x00, 0x01},
		"three items":  {0x91, 0x93, 0x00, 0x01, 0x02},
		"negative":     {0x91, 0x92, 0xff, 0x01},
		"too big":      {0x91, 0x92, 0x00, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0},
		"not an array": {0xa1, 'x'},
	}
	for name, b := range tests {
		var rr RankRanges
		if err := Unmarshal(b, &rr); err == nil {
			t.Errorf("%s: decoded %v without error", name, rr)
		} else if CodeOf(err) != CodeMalformed {
			t.Errorf("%s: code %s", name, CodeOf(err))
		}
	}
	// touching ranges are accepted
	var rr RankRanges
	if err := Unmarshal([]byte{0x92, 0x92, 0x00, 0x01, 0x92, 0x02, 0x03}, &rr); err != nil {
		t.Fatal(err)
	}
	if rr.Count() != 4 {
		t.Fatalf("Count = %d", rr.Count())
	}
}

func TestProcUID(t *testing.T) {
	uid := ProcUID(7, 42)
	if uid != 7<<32|42 {
		t.Fatalf("ProcUID = %x", uid)
	}
	if j, r := SplitProcUID(uid); j != 7 || r != 42 {
		t.Fatalf("SplitProcUID = %d, %d", j, r)
	}
}

func TestCanonProcs(t *testing.T) {
	for _, tc := range []struct {
		procs []ProcRanges
		key   string
	}{
		{nil, "j=*"},
		{[]ProcRanges{{Job: "j"}, {Ranks: Span(1, 1)}}, "j=*"},
		{[]ProcRanges{{Ranks: Span(0, 1)}, {Job: "j", Ranks: Span(2, 2)}}, "j=0-2"},
		{[]ProcRanges{{Ranks: Span(0, 5)}, {Ranks: Span(3, 9)}, {Ranks: RankRanges{{1, 1}, {20, 21}}}}, "j=0-9,20-21"},
		{[]ProcRanges{{Job: "k", Ranks: Span(1, 1)}, {Ranks: RangesOf([]uint32{2, 0})}}, "j=0,2;k=1"},
		{[]ProcRanges{{Job: "k"}, {Ranks: Span(1, 1)}, {Job: "k", Ranks: Span(0, 3)}}, "j=1;k=*"},
	} {
		spec, err := CanonProcs("j", tc.procs)
		if err != nil || spec.Key != tc.key {
			t.Errorf("CanonProcs(%v) = %q, %v; want %q", tc.procs, spec.Key, err, tc.key)
		}
	}
	if _, err := CanonProcs("j", []ProcRanges{{Ranks: RankRanges{{3, 1}}}}); err == nil {
		t.Error("a reversed range was accepted")
	}
}

// BenchmarkCanonProcs: the list of a fence over 65,536 ranks, which every
// process and daemon of such a fence passes: its cost is its ranges'.
func BenchmarkCanonProcs(b *testing.B) {
	procs := []ProcRanges{{Ranks: Span(0, 32767)}, {Ranks: Span(32768, 65535)}}
	for b.Loop() {
		if _, err := CanonProcs("j", procs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCanonProcsDoesNotExpand: the canonical form of a list naming 2^20
// ranks in two ranges is built from the ranges. An implementation that
// expands them allocates megabytes (4 bytes a rank, and again to sort);
// this one, a few hundred bytes.
func TestCanonProcsDoesNotExpand(t *testing.T) {
	procs := []ProcRanges{{Ranks: Span(0, 1<<19-1)}, {Job: "j", Ranks: Span(1<<19, 1<<20-1)}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	spec, err := CanonProcs("j", procs)
	runtime.ReadMemStats(&after)
	if err != nil || spec.Key != "j=0-1048575" {
		t.Fatalf("CanonProcs = %q, %v", spec.Key, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Errorf("CanonProcs allocated %d bytes for a list of two ranges", n)
	}
}
