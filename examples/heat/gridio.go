package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// The --out format is text that keeps every float64 exactly: a header line
// "heat-grid NX NY STEPS", then NX lines of NY values each, written with
// the shortest representation that reads back to the same bits.

// Grid is a whole grid as written by --out.
type Grid struct {
	NX, NY, Steps int
	V             []float64 // row-major, NX*NY
}

// WriteGrid writes g in the --out format.
func WriteGrid(w io.Writer, g Grid) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "heat-grid %d %d %d\n", g.NX, g.NY, g.Steps)
	buf := make([]byte, 0, 32)
	for i := range g.NX {
		for j := range g.NY {
			if j > 0 {
				bw.WriteByte(' ')
			}
			buf = strconv.AppendFloat(buf[:0], g.V[i*g.NY+j], 'g', -1, 64)
			bw.Write(buf)
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// ReadGrid reads a grid written by WriteGrid.
func ReadGrid(r io.Reader) (Grid, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<26)
	var g Grid
	if !sc.Scan() {
		return g, wire.Errorf(wire.ErrInvalid, "heat: empty grid file")
	}
	if _, err := fmt.Sscanf(sc.Text(), "heat-grid %d %d %d", &g.NX, &g.NY, &g.Steps); err != nil {
		return g, wire.Errorf(wire.ErrInvalid, "heat: grid header %q: %w", sc.Text(), err)
	}
	if g.NX <= 0 || g.NY <= 0 || g.NX*g.NY > 1<<26 {
		return g, wire.Errorf(wire.ErrInvalid, "heat: grid of %d×%d", g.NX, g.NY)
	}
	g.V = make([]float64, 0, g.NX*g.NY)
	for i := 0; i < g.NX; i++ {
		if !sc.Scan() {
			return g, wire.Errorf(wire.ErrInvalid, "heat: grid ends after %d of %d rows", i, g.NX)
		}
		f := strings.Fields(sc.Text())
		if len(f) != g.NY {
			return g, wire.Errorf(wire.ErrInvalid, "heat: grid row %d has %d values, want %d", i, len(f), g.NY)
		}
		for _, s := range f {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return g, wire.Errorf(wire.ErrInvalid, "heat: grid row %d: %w", i, err)
			}
			g.V = append(g.V, x)
		}
	}
	return g, sc.Err()
}

// MaxDiff is the largest absolute difference between two grids of the
// same shape.
func MaxDiff(a, b Grid) (float64, error) {
	if a.NX != b.NX || a.NY != b.NY || len(a.V) != len(b.V) {
		return 0, wire.Errorf(wire.ErrInvalid, "heat: grids of %d×%d and %d×%d", a.NX, a.NY, b.NX, b.NY)
	}
	d := 0.0
	for i := range a.V {
		d = max(d, abs(a.V[i]-b.V[i]))
	}
	return d, nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
