package comm

import (
	"unsafe"

	"github.com/dynrt/dynrt/wire"
)

// Number is an element type of the numeric operations.
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Op is a reduction operation.
type Op int

const (
	Sum Op = iota
	Min
	Max
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	}
	return "op(?)"
}

// combine folds src into acc element by element (acc = acc op src).
func combine[T Number](op Op, acc, src []T) error {
	if len(acc) != len(src) {
		return wire.Errorf(wire.ErrInvalid, "comm: %s of %d and %d elements", op, len(acc), len(src))
	}
	switch op {
	case Sum:
		for i, v := range src {
			acc[i] += v
		}
	case Min:
		for i, v := range src {
			if v < acc[i] {
				acc[i] = v
			}
		}
	case Max:
		for i, v := range src {
			if v > acc[i] {
				acc[i] = v
			}
		}
	default:
		return wire.Errorf(wire.ErrInvalid, "comm: unknown reduction %d", int(op))
	}
	return nil
}

// Slices travel as their in-memory bytes: every host dynrt runs on is
// little-endian with 64-bit int, so the bytes mean the same on both sides
// and no per-element conversion is needed.

func sliceBytes[T Number](v []T) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(z)))
}

func bytesSlice[T Number](b []byte) ([]T, error) {
	var z T
	size := int(unsafe.Sizeof(z))
	if len(b)%size != 0 {
		return nil, wire.Errorf(wire.ErrMalformed, "comm: %d bytes are not a whole number of %d-byte elements", len(b), size)
	}
	v := make([]T, len(b)/size)
	copy(sliceBytes(v), b)
	return v, nil
}
