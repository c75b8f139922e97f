package wire

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// Raw is one msgpack value kept encoded, as msgpack.RawMessage, for a
// field that is passed on or decoded later (a relay's inner body, a
// fence's collected data). Under Unmarshal it is taken from the input in
// one copy; msgpack's own
// RawMessage skips the value element by element while growing a copy,
// which was most of what a daemon spent on a relayed fence of a
// thousand nodes (docs/scale.md). Its end is found by the same
// allocation-free walk as the frame check (checkValue).
type Raw []byte

// EncodeMsgpack writes the value as it is (nil for an empty Raw).
func (r Raw) EncodeMsgpack(enc *msgpack.Encoder) error {
	return msgpack.RawMessage(r).EncodeMsgpack(enc)
}

// DecodeMsgpack keeps the next value encoded.
func (r *Raw) DecodeMsgpack(dec *msgpack.Decoder) error {
	if sr, ok := dec.Buffered().(*sliceReader); ok {
		end, err := checkValue(sr.b, sr.off)
		if err != nil {
			return err
		}
		*r = bytes.Clone(sr.b[sr.off:end])
		sr.off = end
		return nil
	}
	m, err := dec.DecodeRaw()
	*r = Raw(m)
	return err
}

// EventHead reads the kind and job of an encoded Event without decoding
// the rest: what a daemon needs to hand a bus event on to its clients as
// the master encoded it. An Event is encoded in field order, so both come
// before any field but Seq and Time, and the read stops at the first
// other field. b must have passed the frame check (Request.Body has).
func EventHead(b []byte) (kind, job string, err error) {
	n, off, err := readMapLen(b, 0)
	if err != nil {
		return "", "", Errorf(ErrMalformed, "wire: event: %v", err)
	}
	for range n {
		var key, v []byte
		if key, off, err = readStr(b, off); err != nil {
			return "", "", Errorf(ErrMalformed, "wire: event: %v", err)
		}
		switch string(key) {
		case "k", "j":
			if v, off, err = readStr(b, off); err != nil {
				return "", "", Errorf(ErrMalformed, "wire: event: field %s: %v", key, err)
			}
			if key[0] == 'k' {
				kind = string(v)
			} else {
				job = string(v)
			}
		case "seq", "t":
			if off, err = checkValue(b, off); err != nil {
				return "", "", Errorf(ErrMalformed, "wire: event: %v", err)
			}
		default:
			return kind, job, nil
		}
	}
	return kind, job, nil
}
