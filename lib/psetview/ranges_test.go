package psetview

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func rr(s string) wire.RankRanges {
	var out wire.RankRanges
	if s == "" {
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		if !found {
			hi = lo
		}
		out = append(out, wire.RankRange{Lo: atou(lo), Hi: atou(hi)})
	}
	return out
}

func atou(s string) uint32 {
	var n uint32
	for _, c := range s {
		n = n*10 + uint32(c-'0')
	}
	return n
}

func TestOps(t *testing.T) {
	cases := []struct {
		a, b             string
		union, diff, and string
	}{
		{"0-3", "2-5", "0-5", "0-1", "2-3"},
		{"0-3", "4-7", "0-7", "0-3", ""},
		{"0-3,8-9", "4-7", "0-9", "0-3,8-9", ""},
		{"0-10", "3,5,7", "0-10", "0-2,4,6,8-10", "3,5,7"},
		{"", "1-2", "1-2", "", ""},
		{"1-2", "", "1-2", "1-2", ""},
		{"0-4294967295", "5", "0-4294967295", "0-4,6-4294967295", "5"},
		{"0-3", "0-3", "0-3", "", "0-3"},
		{"2-3", "0-9", "0-9", "", "2-3"},
	}
	for _, c := range cases {
		a, b := rr(c.a), rr(c.b)
		if got := Union(a, b).String(); got != c.union {
			t.Errorf("%s ∪ %s = %s, want %s", c.a, c.b, got, c.union)
		}
		if got := Difference(a, b).String(); got != c.diff {
			t.Errorf("%s \\ %s = %s, want %s", c.a, c.b, got, c.diff)
		}
		if got := Intersection(a, b).String(); got != c.and {
			t.Errorf("%s ∩ %s = %s, want %s", c.a, c.b, got, c.and)
		}
		if got := Intersects(a, b); got != (c.and != "") {
			t.Errorf("Intersects(%s, %s) = %v", c.a, c.b, got)
		}
	}
	if _, err := Apply("xor", nil, nil); err == nil || !strings.Contains(err.Error(), "union, difference or intersection") {
		t.Errorf("Apply(xor): %v", err)
	}
	if got, err := Apply("UNION", rr("1"), rr("2")); err != nil || got.String() != "1-2" {
		t.Errorf("Apply(UNION): %v %v", got, err)
	}
}

// The range algebra agrees with plain sets on random inputs.
func TestOpsMatchNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() ([]uint32, wire.RankRanges) {
		var ranks []uint32
		for r := uint32(0); r < 64; r++ {
			if rng.IntN(3) == 0 {
				ranks = append(ranks, r)
			}
		}
		return ranks, wire.RangesOf(ranks)
	}
	naive := func(a, b []uint32, keep func(inA, inB bool) bool) string {
		var out []uint32
		for r := uint32(0); r < 64; r++ {
			if keep(slices.Contains(a, r), slices.Contains(b, r)) {
				out = append(out, r)
			}
		}
		return wire.RangesOf(out).String()
	}
	for range 500 {
		la, a := random()
		lb, b := random()
		if got, want := Union(a, b).String(), naive(la, lb, func(x, y bool) bool { return x || y }); got != want {
			t.Fatalf("union %v %v = %s, want %s", a, b, got, want)
		}
		if got, want := Difference(a, b).String(), naive(la, lb, func(x, y bool) bool { return x && !y }); got != want {
			t.Fatalf("difference %v %v = %s, want %s", a, b, got, want)
		}
		if got, want := Intersection(a, b).String(), naive(la, lb, func(x, y bool) bool { return x && y }); got != want {
			t.Fatalf("intersection %v %v = %s, want %s", a, b, got, want)
		}
		sub := true
		for _, r := range la {
			sub = sub && slices.Contains(lb, r)
		}
		if got := SubsetOf(a, b); got != sub {
			t.Fatalf("SubsetOf(%v, %v) = %v, want %v", a, b, got, sub)
		}
		for _, res := range []wire.RankRanges{Union(a, b), Difference(a, b), Intersection(a, b)} {
			if err := res.Check(); err != nil {
				t.Fatalf("result %v not canonical: %v", res, err)
			}
			for i := 1; i < len(res); i++ {
				if res[i-1].Hi+1 == res[i].Lo {
					t.Fatalf("result %v has touching ranges", res)
				}
			}
		}
	}
}

func TestShort(t *testing.T) {
	cases := []struct {
		in    string
		width int
		want  string
	}{
		{"", 10, "-"},
		{"0-3,7,9-10", 0, "0-3,7,9-10"},
		{"0-3,7,9-10", 40, "0-3,7,9-10"},
		{"0,2,4,6,8,10,12,14", 10, "0,2,…(+6)"},
		{"100-200", 3, "100-200"}, // the first range is always shown
	}
	for _, c := range cases {
		if got := Short(rr(c.in), c.width); got != c.want {
			t.Errorf("Short(%s, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
	}
}
