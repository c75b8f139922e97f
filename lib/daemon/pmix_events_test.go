package daemon

import (
	"reflect"
	"testing"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// TestProcRanges: PMIx job control targets become the master's process
// ranges: by namespace in order of appearance, ranks sorted without
// repeats, a wildcard taking the whole namespace.
func TestProcRanges(t *testing.T) {
	w := pmix.RankWildcard
	for _, tc := range []struct {
		in   []pmix.Proc
		want []wire.ProcRanges
	}{
		{nil, []wire.ProcRanges{}},
		{[]pmix.Proc{{Nspace: "a", Rank: 3}, {Nspace: "a", Rank: 1}, {Nspace: "a", Rank: 2}, {Nspace: "a", Rank: 3}}, []wire.ProcRanges{{Job: "a", Ranks: wire.RankRanges{{Lo: 1, Hi: 3}}}}},
		{[]pmix.Proc{{Nspace: "b", Rank: 0}, {Nspace: "a", Rank: w}, {Nspace: "a", Rank: 5}}, []wire.ProcRanges{{Job: "b", Ranks: wire.RankRanges{{Lo: 0, Hi: 0}}}, {Job: "a"}}},
	} {
		if got := procRanges(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("procRanges(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
