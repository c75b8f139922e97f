package psetview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Rank lists as the tools take them on their command lines (dynrc sub
// --ranks, dynpset op split --ranks).

// ParseRanks reads a rank list such as "3,5-7": comma-separated ranks and
// inclusive ranges. Whitespace around items is allowed. An empty list, an
// empty item, a reversed range or a rank named twice is an error, so that a
// typo never removes processes nobody meant to remove.
func ParseRanks(s string) (wire.RankRanges, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty rank list")
	}
	var ranks []uint32
	seen := map[uint32]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("rank list %q: empty item", s)
		}
		loS, hiS, isRange := strings.Cut(item, "-")
		lo, err := parseRank(loS)
		if err != nil {
			return nil, fmt.Errorf("rank list %q: %v", s, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseRank(hiS); err != nil {
				return nil, fmt.Errorf("rank list %q: %v", s, err)
			}
			if hi < lo {
				return nil, fmt.Errorf("rank list %q: range %s is reversed", s, item)
			}
			if hi-lo >= MaxListedRanks {
				return nil, fmt.Errorf("rank list %q: range %s is too long", s, item)
			}
		}
		for r := lo; ; r++ {
			if seen[r] {
				return nil, fmt.Errorf("rank list %q: rank %d named twice", s, r)
			}
			seen[r] = true
			ranks = append(ranks, r)
			if r == hi {
				break
			}
		}
		if len(ranks) > MaxListedRanks {
			return nil, fmt.Errorf("rank list %q: more than %d ranks", s, MaxListedRanks)
		}
	}
	return wire.RangesOf(ranks), nil
}

// MaxListedRanks bounds what a rank list may expand to: far above any job
// this runtime runs, low enough that "0-4000000000" cannot eat the memory.
const MaxListedRanks = 1 << 20

func parseRank(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a rank", s)
	}
	return uint32(v), nil
}
