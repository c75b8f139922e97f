package main

import (
	"encoding/binary"
	"math"

	"github.com/dynrt/dynrt/wire"
)

// initial is the deterministic starting value of cell (i, j) of an nx×ny
// grid. The boundary stays fixed: a hot top edge, a linear left edge, cold
// right and bottom edges. The interior starts from a pattern with no
// symmetry, so that a row put in the wrong place changes the result.
func initial(nx, ny, i, j int) float64 {
	switch {
	case i == 0:
		return 1
	case i == nx-1 || j == ny-1:
		return 0
	case j == 0:
		return 1 - float64(i)/float64(nx-1)
	}
	return float64((i*31+j*17)%97) / 97
}

// block is the rows [rows.Lo, rows.Hi) of the grid a process holds, with one
// ghost row above and below: u holds (rows.Len()+2)*ny values, row r of the
// grid at index (r-rows.Lo+1)*ny.
type block struct {
	nx, ny int
	rows   Range
	u, v   []float64 // current values and scratch for the next step
}

func newBlock(nx, ny int, rows Range) *block {
	b := &block{nx: nx, ny: ny, rows: rows}
	b.u = make([]float64, (rows.Len()+2)*ny)
	b.v = make([]float64, len(b.u))
	return b
}

// fill sets the held rows to the initial condition.
func (b *block) fill() {
	for i := b.rows.Lo; i < b.rows.Hi; i++ {
		row := b.row(i)
		for j := range row {
			row[j] = initial(b.nx, b.ny, i, j)
		}
	}
}

// row is grid row i (a held row or one of the two ghost rows).
func (b *block) row(i int) []float64 {
	k := (i - b.rows.Lo + 1) * b.ny
	return b.u[k : k+b.ny]
}

// step does one Jacobi sweep over the held interior cells (the ghost rows
// must be current) and returns the largest change of a cell. The cell
// update is the same expression in the same order wherever the row lives,
// so any decomposition gives bit-identical grids.
func (b *block) step() float64 {
	ny := b.ny
	copy(b.v, b.u)
	diff := 0.0
	for i := b.rows.Lo; i < b.rows.Hi; i++ {
		if i == 0 || i == b.nx-1 {
			continue
		}
		k := (i - b.rows.Lo + 1) * ny
		up, mid, down := b.u[k-ny:k], b.u[k:k+ny], b.u[k+ny:k+2*ny]
		out := b.v[k : k+ny]
		for j := 1; j < ny-1; j++ {
			x := (up[j] + down[j] + mid[j-1] + mid[j+1]) * 0.25
			diff = max(diff, math.Abs(x-mid[j]))
			out[j] = x
		}
	}
	b.u, b.v = b.v, b.u
	return diff
}

// held returns a copy of rows r (inside the held rows) as one slice.
func (b *block) held(r Range) []float64 {
	k := (r.Lo - b.rows.Lo + 1) * b.ny
	return append([]float64(nil), b.u[k:k+r.Len()*b.ny]...)
}

// put stores vals as rows starting at grid row lo (held or ghost rows).
func (b *block) put(lo int, vals []float64) {
	k := (lo - b.rows.Lo + 1) * b.ny
	copy(b.u[k:], vals)
}

// encodeFloats packs float64s little-endian, bit for bit.
func encodeFloats(v []float64) []byte {
	out := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(x))
	}
	return out
}

func decodeFloats(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "heat: %d bytes are not a float64 array", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

// rowsMsg is a piece of the grid in a message: first row, then the values.
func rowsMsg(lo int, vals []float64) []byte {
	out := make([]byte, 8, 8+8*len(vals))
	binary.LittleEndian.PutUint64(out, uint64(lo))
	return append(out, encodeFloats(vals)...)
}

func parseRowsMsg(b []byte, ny int) (int, []float64, error) {
	if len(b) < 8 {
		return 0, nil, wire.Errorf(wire.ErrInvalid, "heat: rows message of %d bytes", len(b))
	}
	vals, err := decodeFloats(b[8:])
	if err == nil && len(vals)%ny != 0 {
		err = wire.Errorf(wire.ErrInvalid, "heat: rows message with %d values, not a multiple of the row length %d", len(vals), ny)
	}
	return int(binary.LittleEndian.Uint64(b)), vals, err
}
