package wire

import (
	"math"
	"math/rand/v2"
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
