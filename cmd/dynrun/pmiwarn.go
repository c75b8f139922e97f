package main

import (
	"fmt"

	"github.com/dynrt/dynrt/lib/mpidetect"
	"github.com/dynrt/dynrt/wire"
)

// pmiMismatch is the warning for an explicit --pmi mode that the program's
// MPI cannot use (v: what its file says it needs), "" if there is none.
// Such a launch is not refused (the user chose), but without a word each
// process would start as a singleton, "rank 0 of 1", and exit 0.
func pmiMismatch(mode, prog string, v mpidetect.Verdict) string {
	var speaks, fix string
	switch {
	case v.Need == mpidetect.PMIx && (mode == wire.PMIFD || mode == wire.PMIPort || mode == wire.PMINone):
		speaks, fix = "PMIx only", "--pmi pmix"
	case v.Need == mpidetect.PMI && (mode == wire.PMIPMIx || mode == wire.PMINone):
		speaks, fix = "PMI-1/PMI-2 only", "--pmi fd or --pmi port"
	default:
		return ""
	}
	return fmt.Sprintf("dynrun: warning: %s %s, which speaks %s: with --pmi %s its processes find no service they speak "+
		"and each runs as a singleton (rank 0 of 1); launching anyway as asked; use --pmi auto (the default) or %s",
		prog, v.Why, speaks, mode, fix)
}
