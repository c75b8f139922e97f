package wire

import (
	"fmt"
	"math"
	"reflect"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The msgpack decoder converts any integer into a uint32 field by
// truncation: a raw job.launch with n: -1 read as 4294967295 processes, and
// n: 4294967297 as 1. Every uint32 of every message (counts, ranks, ids)
// is decoded strictly instead: a negative or wider value is malformed.
func init() {
	msgpack.Register(uint32(0), nil, decodeUint32Strict)
}

func decodeUint32Strict(d *msgpack.Decoder, v reflect.Value) error {
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	var n uint64
	switch {
	case c == msgpcode.Nil:
		if err := d.Skip(); err != nil {
			return err
		}
	case msgpcode.IsFixedNum(c) && int8(c) < 0, c == msgpcode.Int8, c == msgpcode.Int16, c == msgpcode.Int32, c == msgpcode.Int64:
		i, err := d.DecodeInt64()
		if err != nil {
			return err
		}
		if i < 0 {
			return fmt.Errorf("msgpack: %d is negative; the field is an unsigned 32-bit number", i)
		}
		n = uint64(i)
	default:
		if n, err = d.DecodeUint64(); err != nil {
			return err
		}
	}
	if n > math.MaxUint32 {
		return fmt.Errorf("msgpack: %d does not fit the unsigned 32-bit field", n)
	}
	v.SetUint(n)
	return nil
}
