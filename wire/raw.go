package wire

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// Raw is one msgpack value kept encoded, as msgpack.RawMessage, for a
// field that is passed on or decoded later (a relay's inner body, a
// fence's collected data). Under Unmarshal it is taken from the input in
// one copy once the frame check has found its end; msgpack's own
// RawMessage skips the value element by element while growing a copy,
// which was most of what a daemon spent on a relayed fence of a
// thousand nodes (docs/scale.md).
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

// Placements is a list of Placement decoded in one pass over the input
// under Unmarshal. A change's record and a job's data list a node per
// entry, and every daemon and every process of the job reads them:
// msgpack's reflection decoded each entry field by field and allocated
// the list twice (BenchmarkPlacementsDecode).
type Placements []Placement

// EncodeMsgpack writes the list as msgpack's reflection does (each entry a
// map of its fields that are not empty), appended in place: the
// reflection spent most of its time on the empty-field checks.
func (ps Placements) EncodeMsgpack(enc *msgpack.Encoder) error {
	if w, ok := enc.Writer().(*buffer); ok {
		w.b = ps.appendMsgpack(w.b)
		return nil
	}
	_, err := enc.Writer().Write(ps.appendMsgpack(nil))
	return err
}

func (ps Placements) appendMsgpack(b []byte) []byte {
	if ps == nil {
		return append(b, 0xc0)
	}
	b = appendArrayLen(b, len(ps))
	for _, p := range ps {
		n := 0
		if p.Node != "" {
			n++
		}
		if len(p.Ranks) > 0 {
			n++
		}
		b = appendMapLen(b, n)
		if p.Node != "" {
			b = appendStr(appendStr(b, "n"), p.Node)
		}
		if len(p.Ranks) > 0 {
			b = p.Ranks.appendMsgpack(appendStr(b, "r"))
		}
	}
	return b
}

// DecodeMsgpack reads a list of Placement.
func (ps *Placements) DecodeMsgpack(dec *msgpack.Decoder) error {
	sr, ok := dec.Buffered().(*sliceReader)
	if !ok {
		var out []Placement
		if err := dec.Decode(&out); err != nil {
			return err
		}
		*ps = out
		return nil
	}
	out, end, err := parsePlacements(sr.b, sr.off)
	if err != nil {
		return err
	}
	sr.off = end
	*ps = out
	return nil
}

// parsePlacements reads a msgpack array (or nil) of Placement maps at
// b[off], ignoring keys other than n and r as the struct decoder does.
func parsePlacements(b []byte, off int) (Placements, int, error) {
	if off < len(b) && b[off] == 0xc0 {
		return nil, off + 1, nil
	}
	n, off, err := readArrayLen(b, off)
	if err != nil {
		return nil, off, err
	}
	if n > len(b)-off { // each entry takes a byte at least
		return nil, off, errBadLength
	}
	out := make(Placements, n)
	for i := range out {
		var keys int
		if keys, off, err = readMapLen(b, off); err != nil {
			return nil, off, err
		}
		for range keys {
			var key []byte
			if key, off, err = readStr(b, off); err != nil {
				return nil, off, err
			}
			switch string(key) {
			case "n":
				var v []byte
				if v, off, err = readStr(b, off); err != nil {
					return nil, off, err
				}
				out[i].Node = string(v)
			case "r":
				rr, used, err := parseRanges(b[off:])
				if err != nil {
					return nil, off, err
				}
				out[i].Ranks, off = rr, off+used
			default:
				if off, err = checkValue(b, off); err != nil {
					return nil, off, err
				}
			}
		}
	}
	return out, off, nil
}
