package main

import (
	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/wire"
)

// parseRanks reads a rank list such as "3,5-7" (psetview.ParseRanks, which
// dynpset shares).
func parseRanks(s string) (wire.RankRanges, error) { return psetview.ParseRanks(s) }
