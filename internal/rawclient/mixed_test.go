package rawclient_test

import (
	"testing"

	"github.com/dynrt/dynrt/internal/dvmtest"
)

// TestMixedImplementations runs one job whose ranks use two client
// implementations of phase 3 — the even ranks internal/rawclient/rawrank
// (raw frames), the odd ones internal/malleable (lib/session) — through an
// ADD, a SUB, a REPLACE and another ADD. The raw rank 0 is the root of the
// first three (its set operations and accept speak for lib/session
// members), the lib/session rank 1 the root of the last one; the confirm
// fences mix both kinds of new processes. Every process must see every
// change it takes part in FINALIZED with the same set version, the
// removed and replaced ones leave, and the job ends well.
func TestMixedImplementations(t *testing.T) {
	raw := progs.Build(t, "github.com/dynrt/dynrt/internal/rawclient/rawrank")
	dvmtest.MixedJob(t, progs, "mix", func(mall string) []string {
		return []string{raw, "-session", mall, "-last", "4", "-timeout", "60s", "--", "-last", "4", "-timeout", "60s"}
	})
}
