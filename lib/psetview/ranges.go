// Package psetview is the pure presentation logic that dynpset and dyntop
// share for process sets: set algebra on compact rank ranges, the
// classifications of thesis §6.1.3 (malleable, reference counted) computed
// from what a tool receives over the wire, the hierarchy of sets by the
// subset relation (thesis fig. 6.1), and its text rendering.
//
// Nothing here does I/O. Tools fetch wire.PsetInfo values (with members)
// from the master and hand them in.
package psetview

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dynrt/dynrt/wire"
)

// Union returns a ∪ b. The inputs must be canonical (sorted, disjoint), as
// wire.RankRanges always are after decoding; the result is canonical too.
func Union(a, b wire.RankRanges) wire.RankRanges { return canon(a.Union(b)) }

// Intersection returns a ∩ b.
func Intersection(a, b wire.RankRanges) wire.RankRanges {
	var out wire.RankRanges
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].Lo, b[j].Lo), min(a[i].Hi, b[j].Hi)
		if lo <= hi {
			out = append(out, wire.RankRange{Lo: lo, Hi: hi})
		}
		if a[i].Hi < b[j].Hi {
			i++
		} else {
			j++
		}
	}
	return canon(out)
}

// Difference returns a \ b.
func Difference(a, b wire.RankRanges) wire.RankRanges {
	var out wire.RankRanges
	j := 0
	for _, g := range a {
		lo := g.Lo
		for j < len(b) && b[j].Hi < lo {
			j++
		}
		k := j
		done := false
		for ; k < len(b) && b[k].Lo <= g.Hi; k++ {
			if b[k].Lo > lo {
				out = append(out, wire.RankRange{Lo: lo, Hi: b[k].Lo - 1})
			}
			if b[k].Hi >= g.Hi {
				done = true
				break
			}
			lo = b[k].Hi + 1
		}
		if !done {
			out = append(out, wire.RankRange{Lo: lo, Hi: g.Hi})
		}
	}
	return canon(out)
}

// canon merges touching ranges (the merge loops above can leave two
// ranges that meet end to end) and returns nil for an empty set.
func canon(rr wire.RankRanges) wire.RankRanges {
	if len(rr) == 0 {
		return nil
	}
	out := rr[:1]
	for _, g := range rr[1:] {
		if n := len(out); uint64(out[n-1].Hi)+1 >= uint64(g.Lo) {
			out[n-1].Hi = max(out[n-1].Hi, g.Hi)
			continue
		}
		out = append(out, g)
	}
	return out
}

// Apply computes op (wire.OpUnion, OpDifference or OpIntersection, any
// case) of a and b.
func Apply(op string, a, b wire.RankRanges) (wire.RankRanges, error) {
	switch strings.ToLower(op) {
	case wire.OpUnion:
		return Union(a, b), nil
	case wire.OpDifference:
		return Difference(a, b), nil
	case wire.OpIntersection:
		return Intersection(a, b), nil
	}
	return nil, wire.Errorf(wire.ErrInvalid, "unknown set operation %q (want union, difference or intersection)", op)
}

// SubsetOf reports whether a ⊆ b.
func SubsetOf(a, b wire.RankRanges) bool {
	j := 0
	for _, g := range a {
		for j < len(b) && b[j].Hi < g.Lo {
			j++
		}
		if j == len(b) || b[j].Lo > g.Lo || b[j].Hi < g.Hi {
			return false
		}
	}
	return true
}

// Intersects reports whether a and b share a rank.
func Intersects(a, b wire.RankRanges) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if max(a[i].Lo, b[j].Lo) <= min(a[i].Hi, b[j].Hi) {
			return true
		}
		if a[i].Hi < b[j].Hi {
			i++
		} else {
			j++
		}
	}
	return false
}

// Short renders rr like wire.RankRanges.String ("0-3,7,9-10") but stops
// before width bytes, ending with "…(+N)" where N counts the ranges left
// out. width <= 0 means no limit; an empty set is "-".
func Short(rr wire.RankRanges, width int) string {
	if len(rr) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, g := range rr {
		part := strconv.FormatUint(uint64(g.Lo), 10)
		if g.Hi != g.Lo {
			part += "-" + strconv.FormatUint(uint64(g.Hi), 10)
		}
		if i > 0 {
			part = "," + part
		}
		if width > 0 {
			tail := ""
			if i < len(rr)-1 {
				tail = ",…(+" + strconv.Itoa(len(rr)-i-1) + ")"
			}
			if utf8.RuneCountInString(b.String())+len(part)+utf8.RuneCountInString(tail) > width && i > 0 {
				b.WriteString(",…(+" + strconv.Itoa(len(rr)-i) + ")")
				return b.String()
			}
		}
		b.WriteString(part)
	}
	return b.String()
}
