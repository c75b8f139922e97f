package daemon

import (
	"reflect"
	"testing"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// TestPMIxSpaces: dynrt ranks and PMIx names of a job that two ADDs grew
// (ranks 4-5 in dvm1.3.rc2, 6 in dvm1.3.rc4; an aborted ADD's namespace
// for ranks 6-7, rc3, was replaced by rc4's for rank 6), both ways.
func TestPMIxSpaces(t *testing.T) {
	data := &wire.JobData{Job: "dvm1.3", PMIx: []wire.PMIxSpace{
		{Nspace: "dvm1.3.rc2", Ranks: wire.Span(4, 5), Delta: "mpi://rte/a/rc/2"},
		{Nspace: "dvm1.3.rc3", Ranks: wire.Span(6, 7), Delta: "mpi://rte/a/rc/3"},
		{Nspace: "dvm1.3.rc4", Ranks: wire.Span(6, 6), Delta: "mpi://rte/a/rc/4"},
	}}
	// set "": pmixName (who has the rank now); else pmixNameIn: the
	// aborted ADD's delta set keeps its own namespace for rank 6, any
	// other set names who has rank 6 now.
	for _, tc := range []struct {
		job, set string
		rank     uint32
		want     pmix.Proc
	}{
		{"dvm1.3", "", 0, pmix.Proc{Nspace: "dvm1.3", Rank: 0}},
		{"dvm1.3", "", 3, pmix.Proc{Nspace: "dvm1.3", Rank: 3}},
		{"dvm1.3", "", 4, pmix.Proc{Nspace: "dvm1.3.rc2", Rank: 0}},
		{"dvm1.3", "", 5, pmix.Proc{Nspace: "dvm1.3.rc2", Rank: 1}},
		{"dvm1.3", "", 6, pmix.Proc{Nspace: "dvm1.3.rc4", Rank: 0}},
		{"dvm1.3", "", 7, pmix.Proc{Nspace: "dvm1.3.rc3", Rank: 1}},
		{"dvm1.4", "", 5, pmix.Proc{Nspace: "dvm1.4", Rank: 5}}, // another job keeps its name
		{"dvm1.3", "mpi://rte/a/rc/3", 6, pmix.Proc{Nspace: "dvm1.3.rc3", Rank: 0}},
		{"dvm1.3", "mpi://rte/a/rc/4", 6, pmix.Proc{Nspace: "dvm1.3.rc4", Rank: 0}},
		{"dvm1.3", "mpi://app/a", 6, pmix.Proc{Nspace: "dvm1.3.rc4", Rank: 0}},
		{"dvm1.3", "mpi://rte/a/rc/3", 1, pmix.Proc{Nspace: "dvm1.3", Rank: 1}},
	} {
		got := pmixName(data, tc.job, tc.rank)
		if tc.set != "" {
			got = pmixNameIn(data, tc.job, tc.set, tc.rank)
		}
		if got != tc.want {
			t.Errorf("name of %s rank %d in %q = %v, want %v", tc.job, tc.rank, tc.set, got, tc.want)
		}
	}
	if got := pmixName(nil, "dvm1.3", 4); got != (pmix.Proc{Nspace: "dvm1.3", Rank: 4}) {
		t.Errorf("without job data: %v", got)
	}
	// Live: 0, 1, 4, 5, 6 (2 and 3 left by a SUB).
	data.Placement = []wire.Placement{
		{Node: "n0", Ranks: wire.RankRanges{{Lo: 0, Hi: 1}, {Lo: 4, Hi: 4}}}, {Node: "n1", Ranks: wire.Span(5, 6)},
	}
	job := func(rs ...uint32) []pmix.Proc {
		var ps []pmix.Proc
		for _, r := range rs {
			ps = append(ps, pmix.Proc{Nspace: "dvm1.3", Rank: r})
		}
		return ps
	}
	for _, tc := range []struct {
		p    pmix.Proc
		want []pmix.Proc
		ok   bool
	}{
		{pmix.Proc{Nspace: "dvm1.3.rc2", Rank: 1}, job(5), true},
		{pmix.Proc{Nspace: "dvm1.3.rc2", Rank: pmix.RankWildcard}, job(4, 5), true},
		{pmix.Proc{Nspace: "dvm1.3.rc4", Rank: 0}, job(6), true},
		{pmix.Proc{Nspace: "dvm1.3", Rank: 1}, job(1), true},
		{pmix.Proc{Nspace: "dvm1.3", Rank: pmix.RankWildcard}, job(0, 1), true}, // the first namespace's live ranks
		{pmix.Proc{Nspace: "dvm1.9.rc1", Rank: 0}, nil, false},
	} {
		got, ok := dynrtOf(data, tc.p)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("dynrtOf(%v) = %v %v, want %v %v", tc.p, got, ok, tc.want, tc.ok)
		}
	}
	// A job of one namespace: its wildcard is the whole job, as before.
	one := &wire.JobData{Job: "dvm1.3", Placement: data.Placement}
	if got, _ := dynrtOf(one, pmix.Proc{Nspace: "dvm1.3", Rank: pmix.RankWildcard}); !reflect.DeepEqual(got, []pmix.Proc{{Nspace: "dvm1.3", Rank: pmix.RankWildcard}}) {
		t.Errorf("the wildcard of a job without ADDs: %v", got)
	}
}

// TestPMIxSpaceDescribe: an ADD's namespace is described to PMIx with its
// ranks renumbered from 0 on the nodes that run them, and a node that
// runs none of them, or job data that misses some, is an error.
func TestPMIxSpaceDescribe(t *testing.T) {
	data := wire.JobData{Job: "dvm1.3", Placement: []wire.Placement{
		{Node: "n0", Ranks: wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 4, Hi: 4}}},
		{Node: "n1", Ranks: wire.Span(1, 1)},
		{Node: "n2", Ranks: wire.RankRanges{{Lo: 2, Hi: 3}, {Lo: 5, Hi: 5}}},
	}}
	sp := pmixSpace{ns: "dvm1.3.rc2", base: 4, ranks: wire.Span(4, 5), delta: "mpi://rte/a/rc/2", data: data}
	b := &wire.LaunchReq{Job: "dvm1.3", PMI: &wire.PMIJob{Mode: wire.PMIPMIx, Universe: 8}}
	got, err := sp.describe(b, "n2")
	if err != nil {
		t.Fatal(err)
	}
	want := &pmix.Job{Nspace: "dvm1.3.rc2", Size: 2, Universe: 8, Nodes: []string{"n0", "n2"}, RankNode: []int{0, 1}, Node: 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("describe = %+v, want %+v", got, want)
	}
	if _, err := sp.describe(b, "n1"); err == nil {
		t.Error("describe on a node without its ranks: no error")
	}
	sp.ranks = wire.Span(4, 6)
	if _, err := sp.describe(b, "n2"); err == nil {
		t.Error("describe with rank 6 unplaced: no error")
	}
}
