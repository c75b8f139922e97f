package main

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// serial runs the stencil on one block holding the whole grid.
func serial(nx, ny, steps int) Grid {
	b := newBlock(nx, ny, Range{0, nx})
	b.fill()
	for range steps {
		b.step()
	}
	return Grid{NX: nx, NY: ny, Steps: steps, V: b.held(b.rows)}
}

// split runs the stencil over blocks in one process, exchanging ghost rows
// by copying and changing the decomposition at the given steps with Plan,
// as the processes do through their communicators.
func split(t *testing.T, nx, ny, steps int, sizes map[int]int, n0 int) (Grid, float64) {
	t.Helper()
	mk := func(n int) []*block {
		var bs []*block
		for k := range n {
			bs = append(bs, newBlock(nx, ny, Block(nx, n, k)))
		}
		return bs
	}
	bs := mk(n0)
	for _, b := range bs {
		b.fill()
	}
	res := 0.0
	for s := range steps {
		if n, ok := sizes[s]; ok {
			cur := make([]Range, max(n, len(bs)))
			stay := make([]bool, len(cur))
			for i := range cur {
				if i < len(bs) {
					cur[i] = bs[i].rows
				}
				stay[i] = i < n
			}
			target, moves, err := Plan(nx, cur, stay)
			if err != nil {
				t.Fatal(err)
			}
			nb := make([]*block, len(target))
			for i, r := range target {
				nb[i] = newBlock(nx, ny, r)
			}
			for _, m := range moves {
				nb[m.To].put(m.Rows.Lo, bs[m.From].held(m.Rows))
			}
			bs = nb[:n]
		}
		for i, b := range bs {
			if i > 0 {
				b.put(b.rows.Lo-1, bs[i-1].held(Range{b.rows.Lo - 1, b.rows.Lo}))
			}
			if i < len(bs)-1 {
				b.put(b.rows.Hi, bs[i+1].held(Range{b.rows.Hi, b.rows.Hi + 1}))
			}
		}
		res = 0
		for _, b := range bs {
			res = max(res, b.step())
		}
	}
	g := Grid{NX: nx, NY: ny, Steps: steps}
	for _, b := range bs {
		g.V = append(g.V, b.held(b.rows)...)
	}
	return g, res
}

// TestStencilDecompositionFree: the grid after any sequence of
// decompositions equals the serial one bit for bit.
func TestStencilDecompositionFree(t *testing.T) {
	const nx, ny, steps = 33, 17, 60
	want := serial(nx, ny, steps)
	tests := []struct {
		name  string
		n0    int
		sizes map[int]int
	}{
		{"static 1", 1, nil},
		{"static 5", 5, nil},
		{"grow 2 to 5", 2, map[int]int{10: 5}},
		{"shrink 6 to 3", 6, map[int]int{20: 3}},
		{"grow, shrink, grow", 2, map[int]int{5: 7, 25: 1, 40: 4}},
		{"every process its own row", 3, map[int]int{1: nx, 2: 2}},
	}
	for _, tc := range tests {
		got, _ := split(t, nx, ny, steps, tc.sizes, tc.n0)
		d, err := MaxDiff(want, got)
		if err != nil || d != 0 {
			t.Errorf("%s: max difference %g (%v), want 0", tc.name, d, err)
		}
	}
	// The computation must do something: the grid moves away from the
	// start and is not symmetric.
	start := serial(nx, ny, 0)
	if d, _ := MaxDiff(start, want); d < 1e-3 {
		t.Errorf("grid barely changed in %d steps: %g", steps, d)
	}
	if _, res := split(t, nx, ny, steps, nil, 3); !(res > 0 && res < 1) {
		t.Errorf("residual after %d steps: %g", steps, res)
	}
}

func TestGridRoundTrip(t *testing.T) {
	g := serial(9, 5, 7)
	g.V[3] = math.Nextafter(1, 2) // needs every digit
	g.V[4] = 1e-300
	var buf bytes.Buffer
	if err := WriteGrid(&buf, g); err != nil {
		t.Fatal(err)
	}
	back, err := ReadGrid(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if back.NX != 9 || back.NY != 5 || back.Steps != 7 {
		t.Fatalf("header %d %d %d", back.NX, back.NY, back.Steps)
	}
	for i := range g.V {
		if math.Float64bits(g.V[i]) != math.Float64bits(back.V[i]) {
			t.Fatalf("value %d: %v read back as %v", i, g.V[i], back.V[i])
		}
	}
}

func TestReadGridRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"grid 2 2 1\n1 2\n3 4\n",
		"heat-grid 2 2 1\n1 2\n",
		"heat-grid 2 2 1\n1 2\n3\n",
		"heat-grid 2 2 1\n1 2\n3 x\n",
		"heat-grid 0 2 1\n",
	} {
		if _, err := ReadGrid(strings.NewReader(in)); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%q: err %v, want ErrInvalid", in, err)
		}
	}
}

func TestMaxDiff(t *testing.T) {
	a := Grid{NX: 1, NY: 3, V: []float64{1, 2, 3}}
	b := Grid{NX: 1, NY: 3, V: []float64{1, 2.5, 2}}
	if d, err := MaxDiff(a, b); err != nil || d != 1 {
		t.Errorf("MaxDiff %g %v, want 1", d, err)
	}
	c := Grid{NX: 1, NY: 3, V: []float64{1, math.NaN(), 3}}
	if d, _ := MaxDiff(a, c); !math.IsNaN(d) {
		t.Errorf("MaxDiff with NaN: %g", d)
	}
	if _, err := MaxDiff(a, Grid{NX: 3, NY: 1, V: a.V}); err == nil {
		t.Error("grids of different shapes compared")
	}
}

func TestRowsMsg(t *testing.T) {
	lo, vals, err := parseRowsMsg(rowsMsg(7, []float64{1, -2, 3.5, 4}), 2)
	if err != nil || lo != 7 || len(vals) != 4 || vals[2] != 3.5 {
		t.Fatalf("got %d %v %v", lo, vals, err)
	}
	if _, _, err := parseRowsMsg(rowsMsg(7, []float64{1, 2, 3}), 2); err == nil {
		t.Error("3 values accepted as rows of 2")
	}
	if _, _, err := parseRowsMsg([]byte{1, 2}, 2); err == nil {
		t.Error("short message accepted")
	}
}
