package wire

import "github.com/vmihailenco/msgpack/v5"

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
	return encodeAppended(enc, ps.appendMsgpack)
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
