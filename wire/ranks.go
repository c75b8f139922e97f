package wire

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// RankRange is the inclusive range of ranks Lo..Hi.
type RankRange struct {
	Lo, Hi uint32
}

// RankRanges is a set of ranks as ascending, non-overlapping inclusive
// ranges. On the wire it is an array of two-element arrays [[lo, hi], ...]:
// compact for the contiguous rank blocks that launches produce, and easy to
// read from any language. Encoders should also merge touching ranges
// (canonical form); decoders accept touching ranges but reject ranges that
// are reversed, unordered or overlapping.
type RankRanges []RankRange

// RangesOf builds the canonical ranges of a list of ranks in any order,
// duplicates allowed. ranks is not modified.
func RangesOf(ranks []uint32) RankRanges {
	if len(ranks) == 0 {
		return nil
	}
	s := slices.Clone(ranks)
	slices.Sort(s)
	var rr RankRanges
	for _, r := range s {
		rr = rr.Add(r)
	}
	return rr
}

// Span returns the single range lo..hi (nil when hi < lo).
func Span(lo, hi uint32) RankRanges {
	if hi < lo {
		return nil
	}
	return RankRanges{{lo, hi}}
}

// Add returns rr with r added, keeping the canonical form. Adding in
// ascending order is O(1); otherwise O(len(rr)).
func (rr RankRanges) Add(r uint32) RankRanges {
	n := len(rr)
	if n == 0 || r > rr[n-1].Hi { // fast path: append at the end
		if n > 0 && rr[n-1].Hi+1 == r {
			rr[n-1].Hi = r
			return rr
		}
		return append(rr, RankRange{r, r})
	}
	// first range whose Hi >= r
	i := sort.Search(n, func(i int) bool { return rr[i].Hi >= r })
	if rr[i].Lo <= r {
		return rr // already present
	}
	joinPrev := i > 0 && rr[i-1].Hi+1 == r
	joinNext := rr[i].Lo == r+1
	switch {
	case joinPrev && joinNext:
		rr[i-1].Hi = rr[i].Hi
		return slices.Delete(rr, i, i+1)
	case joinPrev:
		rr[i-1].Hi = r
		return rr
	case joinNext:
		rr[i].Lo = r
		return rr
	}
	return slices.Insert(rr, i, RankRange{r, r})
}

// Union returns the canonical ranges of the ranks in rr or in o, both
// canonical (or at least ascending and non-overlapping), in
// O(len(rr)+len(o)): it never expands a range into its ranks.
func (rr RankRanges) Union(o RankRanges) RankRanges {
	out := make(RankRanges, 0, len(rr)+len(o))
	add := func(g RankRange) {
		if n := len(out); n > 0 && uint64(g.Lo) <= uint64(out[n-1].Hi)+1 {
			out[n-1].Hi = max(out[n-1].Hi, g.Hi) // overlapping or touching: merge
			return
		}
		out = append(out, g)
	}
	i, j := 0, 0
	for i < len(rr) || j < len(o) {
		if j == len(o) || (i < len(rr) && rr[i].Lo <= o[j].Lo) {
			add(rr[i])
			i++
		} else {
			add(o[j])
			j++
		}
	}
	return out
}

// Intersect returns the ranks in both rr and o (both canonical), range by
// range in O(len(rr)+len(o)).
func (rr RankRanges) Intersect(o RankRanges) RankRanges {
	var out RankRanges
	for i, j := 0, 0; i < len(rr) && j < len(o); {
		lo, hi := max(rr[i].Lo, o[j].Lo), min(rr[i].Hi, o[j].Hi)
		if lo <= hi {
			out = append(out, RankRange{lo, hi})
		}
		if rr[i].Hi < o[j].Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// Minus returns the ranks of rr that are not in o (both canonical), range
// by range in O(len(rr)+len(o)).
func (rr RankRanges) Minus(o RankRanges) RankRanges {
	var out RankRanges
	j := 0
	for _, g := range rr {
		for j < len(o) && o[j].Hi < g.Lo {
			j++
		}
		lo, covered := g.Lo, false
		for k := j; k < len(o) && o[k].Lo <= g.Hi; k++ {
			if o[k].Lo > lo {
				out = append(out, RankRange{lo, o[k].Lo - 1})
			}
			if o[k].Hi >= g.Hi {
				covered = true
				break
			}
			lo = o[k].Hi + 1
		}
		if !covered {
			out = append(out, RankRange{lo, g.Hi})
		}
	}
	return out
}

// Count returns the number of ranks.
func (rr RankRanges) Count() int {
	n := 0
	for _, g := range rr {
		n += int(g.Hi-g.Lo) + 1
	}
	return n
}

// Contains reports whether r is in the set.
func (rr RankRanges) Contains(r uint32) bool {
	i := sort.Search(len(rr), func(i int) bool { return rr[i].Hi >= r })
	return i < len(rr) && rr[i].Lo <= r
}

// All iterates over the ranks in ascending order.
func (rr RankRanges) All() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for _, g := range rr {
			for r := g.Lo; ; r++ {
				if !yield(r) {
					return
				}
				if r == g.Hi {
					break
				}
			}
		}
	}
}

// Ranks expands the set into a sorted slice.
func (rr RankRanges) Ranks() []uint32 {
	out := make([]uint32, 0, rr.Count())
	for r := range rr.All() {
		out = append(out, r)
	}
	return out
}

// Check reports a range that is reversed, or out of order or overlapping
// with its predecessor.
func (rr RankRanges) Check() error {
	for i, g := range rr {
		if g.Lo > g.Hi {
			return Errorf(ErrInvalid, "wire: rank range %d..%d is reversed", g.Lo, g.Hi)
		}
		if i > 0 && g.Lo <= rr[i-1].Hi {
			return Errorf(ErrInvalid, "wire: rank range %d..%d is not above %d..%d", g.Lo, g.Hi, rr[i-1].Lo, rr[i-1].Hi)
		}
	}
	return nil
}

// String renders the set as "0-3,7,9-10".
func (rr RankRanges) String() string {
	var b strings.Builder
	for i, g := range rr {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(g.Lo), 10))
		if g.Hi != g.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(uint64(g.Hi), 10))
		}
	}
	return b.String()
}

// EncodeMsgpack writes [[lo, hi], ...] (nil for an empty set). The bytes
// are produced directly (member lists are the bulk of pset traffic).
func (rr RankRanges) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeAppended(enc, rr.appendMsgpack)
}

// encodeAppended writes what appendTo appends: in place when enc writes
// to Marshal's buffer, else through a slice of its own.
func encodeAppended(enc *msgpack.Encoder, appendTo func([]byte) []byte) error {
	if w, ok := enc.Writer().(*buffer); ok {
		w.b = appendTo(w.b)
		return nil
	}
	_, err := enc.Writer().Write(appendTo(nil))
	return err
}

func (rr RankRanges) appendMsgpack(b []byte) []byte {
	if rr == nil {
		return append(b, 0xc0)
	}
	b = appendArrayLen(b, len(rr))
	for _, g := range rr {
		b = append(b, 0x92)
		b = appendUint(b, uint64(g.Lo))
		b = appendUint(b, uint64(g.Hi))
	}
	return b
}

// DecodeMsgpack reads [[lo, hi], ...] and checks the order.
func (rr *RankRanges) DecodeMsgpack(dec *msgpack.Decoder) error {
	if sr, ok := dec.Buffered().(*sliceReader); ok {
		// Fast path under Unmarshal: parse the bytes in place.
		out, n, err := parseRanges(sr.rest())
		if err != nil {
			return err
		}
		sr.advance(n)
		*rr = out
		return nil
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*rr = nil
		return nil
	}
	// Under Unmarshal the frame check has bounded n by the bytes present.
	out := make(RankRanges, 0, min(n, 1<<16))
	for i := 0; i < n; i++ {
		m, err := dec.DecodeArrayLen()
		if err != nil {
			return err
		}
		if m != 2 {
			return fmt.Errorf("rank range %d has %d elements, want 2", i, m)
		}
		lo, err := decodeRank(dec)
		if err != nil {
			return err
		}
		hi, err := decodeRank(dec)
		if err != nil {
			return err
		}
		out = append(out, RankRange{lo, hi})
	}
	if err := out.Check(); err != nil {
		return err
	}
	*rr = out
	return nil
}

// parseRanges decodes ranges from the start of b and returns the bytes used.
func parseRanges(b []byte) (RankRanges, int, error) {
	if len(b) > 0 && b[0] == 0xc0 {
		return nil, 1, nil
	}
	n, off, err := readArrayLen(b, 0)
	if err != nil {
		return nil, 0, err
	}
	if n > (len(b)-off)/3 { // each pair takes at least 3 bytes
		return nil, 0, errBadLength
	}
	out := make(RankRanges, n)
	for i := range out {
		if off >= len(b) || b[off] != 0x92 {
			return nil, 0, fmt.Errorf("rank range %d is not a two-element array", i)
		}
		off++
		var lo, hi uint64
		if lo, off, err = readUint(b, off); err != nil {
			return nil, 0, fmt.Errorf("rank range %d: %w", i, err)
		}
		if hi, off, err = readUint(b, off); err != nil {
			return nil, 0, fmt.Errorf("rank range %d: %w", i, err)
		}
		if lo > math.MaxUint32 || hi > math.MaxUint32 {
			return nil, 0, fmt.Errorf("rank range %d: rank out of range", i)
		}
		out[i] = RankRange{uint32(lo), uint32(hi)}
	}
	if err := out.Check(); err != nil {
		return nil, 0, err
	}
	return out, off, nil
}

// decodeRank reads an integer that must fit a rank (the library's own
// DecodeUint32 silently truncates).
func decodeRank(dec *msgpack.Decoder) (uint32, error) {
	v, err := dec.DecodeInt64()
	if err != nil {
		return 0, err
	}
	if v < 0 || v > math.MaxUint32 {
		return 0, fmt.Errorf("rank %d out of range", v)
	}
	return uint32(v), nil
}

// ProcSpec is a process list (a fence's or a group's) in canonical form.
type ProcSpec struct {
	Key   string                // canonical text: equal for equal lists however they were written
	Wild  []string              // jobs named without ranks (every live process), in order of appearance
	Ranks map[string]RankRanges // explicit ranks by job (jobs in Wild left out)
}

// CanonProcs puts a process list in canonical form. An entry without a
// job means callerJob; an entry without ranks, or no entry at all, every
// live process of that job. It costs the list's ranges, never its ranks:
// every daemon and every process of a fence over a large job pass the
// whole list.
func CanonProcs(callerJob string, procs []ProcRanges) (ProcSpec, error) {
	if len(procs) == 0 {
		procs = []ProcRanges{{Job: callerJob}}
	}
	ps := ProcSpec{Ranks: map[string]RankRanges{}}
	for _, pr := range procs {
		job := pr.Job
		if job == "" {
			job = callerJob
		}
		if err := pr.Ranks.Check(); err != nil {
			return ProcSpec{}, err
		}
		if len(pr.Ranks) == 0 {
			if !slices.Contains(ps.Wild, job) {
				ps.Wild = append(ps.Wild, job)
			}
			continue
		}
		ps.Ranks[job] = ps.Ranks[job].Union(pr.Ranks)
	}
	parts := make([]string, 0, len(ps.Wild)+len(ps.Ranks))
	for _, job := range ps.Wild {
		delete(ps.Ranks, job)
		parts = append(parts, job+"=*")
	}
	for job, rs := range ps.Ranks {
		parts = append(parts, job+"="+rs.String())
	}
	slices.Sort(parts)
	ps.Key = strings.Join(parts, ";")
	return ps, nil
}
