package wire

import (
	"encoding/binary"
	"errors"
	"math"
)

// This file holds a tiny msgpack reader/writer for the envelope (kept off the
// reflection path because every frame pays for it) and a structural checker
// that runs over every incoming frame before any decoder sees it.

// maxDepth bounds the nesting of containers in a frame. The deepest catalogue
// message is well under 16 levels; the bound keeps a hostile frame made of
// nested one-element arrays from driving recursive decoders into a fatal
// stack overflow.
const maxDepth = 32

var (
	errShort     = errors.New("truncated msgpack value")
	errBadCode   = errors.New("invalid msgpack type code")
	errTooDeep   = errors.New("msgpack nesting too deep")
	errBadLength = errors.New("msgpack length exceeds the remaining bytes")
	errTrailing  = errors.New("trailing bytes after msgpack value")
	errType      = errors.New("unexpected msgpack type")
)

// checkValue walks the msgpack value starting at b[off] without allocating
// and returns the offset just past it. It checks that every length fits in
// the bytes that remain (each container element needs at least one byte), so
// a decoder that trusts a length to pre-size a slice or map can never be led
// into an allocation larger than the frame justifies, and that nesting stays
// within maxDepth. The walk is iterative for the same reason.
func checkValue(b []byte, off int) (int, error) { return checkNested(b, off, maxDepth) }

// checkNested is checkValue for a value that sits inside `maxDepth - limit`
// containers already (a body inside the envelope map), so that the frame as
// a whole stays within maxDepth.
func checkNested(b []byte, off, limit int) (int, error) {
	limit = min(limit, maxDepth)
	var stack [maxDepth + 1]uint64 // values still to read at each open level
	depth := 0
	stack[0] = 1
	for {
		if stack[depth] == 0 {
			if depth == 0 {
				return off, nil
			}
			depth--
			continue
		}
		stack[depth]--
		if off >= len(b) {
			return off, errShort
		}
		c := b[off]
		off++
		var n uint64    // container elements to push
		var skip uint64 // payload bytes to skip
		switch {
		case c <= 0x7f || c >= 0xe0: // fixint
		case c <= 0x8f: // fixmap
			n = 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			n = uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		default:
			var err error
			n, skip, off, err = checkLong(b, off, c)
			if err != nil {
				return off, err
			}
		}
		if skip > 0 {
			if skip > uint64(len(b)-off) {
				return off, errBadLength
			}
			off += int(skip)
		}
		if n > 0 {
			if n > uint64(len(b)-off) {
				return off, errBadLength
			}
			if depth >= limit {
				return off, errTooDeep
			}
			depth++
			stack[depth] = n
		}
	}
}

// checkLong handles the type codes from 0xc0 to 0xdf: it returns the number
// of nested values (n) or payload bytes (skip) that follow the header.
func checkLong(b []byte, off int, c byte) (n, skip uint64, next int, err error) {
	lenField := func(size int) (uint64, error) {
		if len(b)-off < size {
			return 0, errShort
		}
		var v uint64
		switch size {
		case 1:
			v = uint64(b[off])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[off:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[off:]))
		}
		off += size
		return v, nil
	}
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
	case 0xc4, 0xd9: // bin8, str8
		skip, err = lenField(1)
	case 0xc5, 0xda: // bin16, str16
		skip, err = lenField(2)
	case 0xc6, 0xdb: // bin32, str32
		skip, err = lenField(4)
	case 0xc7: // ext8: length, type, data
		skip, err = lenField(1)
		skip++
	case 0xc8:
		skip, err = lenField(2)
		skip++
	case 0xc9:
		skip, err = lenField(4)
		skip++
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		skip = 4
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		skip = 8
	case 0xcc, 0xd0: // uint8, int8
		skip = 1
	case 0xcd, 0xd1: // uint16, int16
		skip = 2
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1,2,4,8,16 plus the type byte
		skip = 1 + 1<<(c-0xd4)
	case 0xdc: // array16
		n, err = lenField(2)
	case 0xdd: // array32
		n, err = lenField(4)
	case 0xde: // map16
		n, err = lenField(2)
		n *= 2
	case 0xdf: // map32
		n, err = lenField(4)
		n *= 2
	default: // 0xc1 is never used
		err = errBadCode
	}
	return n, skip, off, err
}

// checkOne verifies that b holds exactly one well-formed msgpack value.
func checkOne(b []byte) error {
	end, err := checkValue(b, 0)
	if err != nil {
		return err
	}
	if end != len(b) {
		return errTrailing
	}
	return nil
}

// --- reading primitives (used by the envelope decoder) ---

// readMapLen reads a map header; nil counts as an empty map.
func readMapLen(b []byte, off int) (int, int, error) {
	if off >= len(b) {
		return 0, off, errShort
	}
	c := b[off]
	switch {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), off + 1, nil
	case c == 0xc0:
		return 0, off + 1, nil
	case c == 0xde:
		if len(b)-off < 3 {
			return 0, off, errShort
		}
		return int(binary.BigEndian.Uint16(b[off+1:])), off + 3, nil
	case c == 0xdf:
		if len(b)-off < 5 {
			return 0, off, errShort
		}
		return int(binary.BigEndian.Uint32(b[off+1:])), off + 5, nil
	}
	return 0, off, errType
}

// readArrayLen reads an array header (not nil).
func readArrayLen(b []byte, off int) (int, int, error) {
	if off >= len(b) {
		return 0, off, errShort
	}
	c := b[off]
	switch {
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), off + 1, nil
	case c == 0xdc:
		if len(b)-off < 3 {
			return 0, off, errShort
		}
		return int(binary.BigEndian.Uint16(b[off+1:])), off + 3, nil
	case c == 0xdd:
		if len(b)-off < 5 {
			return 0, off, errShort
		}
		return int(binary.BigEndian.Uint32(b[off+1:])), off + 5, nil
	}
	return 0, off, errType
}

// readStr reads a str (or bin, which some encoders use for text) and returns
// it as a sub-slice of b.
func readStr(b []byte, off int) ([]byte, int, error) {
	if off >= len(b) {
		return nil, off, errShort
	}
	c := b[off]
	off++
	var n, hdr int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		hdr = 1
	case c == 0xda || c == 0xc5:
		hdr = 2
	case c == 0xdb || c == 0xc6:
		hdr = 4
	case c == 0xc0:
		return nil, off, nil
	default:
		return nil, off - 1, errType
	}
	if len(b)-off < hdr {
		return nil, off, errShort
	}
	switch hdr {
	case 1:
		n = int(b[off])
	case 2:
		n = int(binary.BigEndian.Uint16(b[off:]))
	case 4:
		n = int(binary.BigEndian.Uint32(b[off:]))
	}
	off += hdr
	if n < 0 || n > len(b)-off {
		return nil, off, errBadLength
	}
	return b[off : off+n], off + n, nil
}

// readUint reads any msgpack integer that is not negative; nil reads as 0.
func readUint(b []byte, off int) (uint64, int, error) {
	if off >= len(b) {
		return 0, off, errShort
	}
	c := b[off]
	if c <= 0x7f {
		return uint64(c), off + 1, nil
	}
	if c == 0xc0 {
		return 0, off + 1, nil
	}
	size := 0
	signed := false
	switch c {
	case 0xcc:
		size = 1
	case 0xcd:
		size = 2
	case 0xce:
		size = 4
	case 0xcf:
		size = 8
	case 0xd0:
		size, signed = 1, true
	case 0xd1:
		size, signed = 2, true
	case 0xd2:
		size, signed = 4, true
	case 0xd3:
		size, signed = 8, true
	default:
		return 0, off, errType
	}
	off++
	if len(b)-off < size {
		return 0, off, errShort
	}
	var v uint64
	switch size {
	case 1:
		v = uint64(b[off])
		if signed {
			v = uint64(int64(int8(b[off])))
		}
	case 2:
		u := binary.BigEndian.Uint16(b[off:])
		v = uint64(u)
		if signed {
			v = uint64(int64(int16(u)))
		}
	case 4:
		u := binary.BigEndian.Uint32(b[off:])
		v = uint64(u)
		if signed {
			v = uint64(int64(int32(u)))
		}
	case 8:
		v = binary.BigEndian.Uint64(b[off:])
	}
	if signed && int64(v) < 0 {
		return 0, off - 1, errType
	}
	return v, off + size, nil
}

// --- writing primitives (compact forms, as msgpack's UseCompactInts does) ---

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}
