package daemon

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/wire"
)

// TestPMIxJobOf: what the daemon tells the PMIx server about a job comes
// from the launch: size, nodes in placement order, the node of every
// rank, this node's index, applications of a multi-executable job,
// universe size, the spawned flag and the sets at launch; a node outside
// the placement is an error naming it.
func TestPMIxJobOf(t *testing.T) {
	rr := func(rs ...uint32) wire.RankRanges { return wire.RangesOf(rs) }
	two := &wire.JobData{Size: 4, NextRank: 4, Placement: []wire.Placement{{Node: "n0", Ranks: rr(0, 2)}, {Node: "n1", Ranks: rr(1, 3)}}}
	for _, tc := range []struct {
		name string
		b    wire.LaunchReq
		node string
		want pmix.Job
		err  string
	}{
		{"two nodes", wire.LaunchReq{Job: "d.1", Ranks: rr(1, 3), Data: two, PMI: &wire.PMIJob{Mode: wire.PMIPMIx}}, "n1",
			pmix.Job{Nspace: "d.1", Size: 4, Nodes: []string{"n0", "n1"}, RankNode: []int{0, 1, 0, 1}, Node: 1}, ""},
		{"spawned, universe, two apps", wire.LaunchReq{Job: "d.2", Ranks: rr(0, 2), Data: two, PMI: &wire.PMIJob{
			Mode: wire.PMIPMIx, Parent: "kvs_d.1", ParentJob: "d.1", ParentRank: 3, Universe: 16,
			Blocks: []wire.PMIBlock{{Ranks: rr(0, 1), Argv: []string{"a"}}, {Ranks: rr(2, 3), Argv: []string{"b"}}},
		}}, "n0", pmix.Job{Nspace: "d.2", Size: 4, Universe: 16, Nodes: []string{"n0", "n1"}, RankNode: []int{0, 1, 0, 1},
			RankApp: []uint32{0, 0, 1, 1}, Spawned: true, Parent: &pmix.Proc{Nspace: "d.1", Rank: 3}}, ""},
		{"sets at launch", wire.LaunchReq{Job: "d.5", Ranks: rr(0, 2), Data: two, PMI: &wire.PMIJob{Mode: wire.PMIPMIx},
			Psets: &wire.PsetPush{Job: "d.5", Defined: []wire.PsetInfo{{Name: "mpi://WORLD", Job: "d.5", Members: rr(0, 1, 2, 3)}, {Name: "mpi://app/x", Members: rr(0, 2)}}}}, "n0",
			pmix.Job{Nspace: "d.5", Size: 4, Nodes: []string{"n0", "n1"}, RankNode: []int{0, 1, 0, 1},
				Psets: map[string][]uint32{"mpi://WORLD": {0, 1, 2, 3}, "mpi://app/x": {0, 2}}}, ""},
		{"no job data: one node", wire.LaunchReq{Job: "d.3", Ranks: rr(0, 1, 2), PMI: &wire.PMIJob{Mode: wire.PMIPMIx}}, "n0",
			pmix.Job{Nspace: "d.3", Size: 3, Nodes: []string{"n0"}, RankNode: []int{0, 0, 0}}, ""},
		{"node not placed", wire.LaunchReq{Job: "d.4", Ranks: rr(0), Data: two, PMI: &wire.PMIJob{Mode: wire.PMIPMIx}}, "n7",
			pmix.Job{}, "node n7 is not in the placement of job d.4"},
	} {
		got, err := pmixJobOf(&tc.b, tc.node)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("%s: %+v, %v\nwant %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestPMIxEnv: a PMIx process loses inherited PMIX_* variables, and its
// rank's executable block sets its program and directory.
func TestPMIxEnv(t *testing.T) {
	env := withoutPMIxEnv([]string{"PATH=/bin", "PMIX_NAMESPACE=outer", "PMIX_SERVER_URI41=x", "PMIXY=keep"})
	if want := []string{"PATH=/bin", "PMIXY=keep"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	spec := &proc.Spec{Path: "main", Args: []string{"main"}, Dir: "/w"}
	pj := &wire.PMIJob{Blocks: []wire.PMIBlock{{Ranks: wire.RangesOf([]uint32{0}), Argv: []string{"a"}}, {Ranks: wire.RangesOf([]uint32{1, 2}), Argv: []string{"b", "-x"}, Wdir: "/b"}}}
	if app := applyBlock(pj, 2, spec); app != 1 || spec.Path != "b" || !reflect.DeepEqual(spec.Args, []string{"b", "-x"}) || spec.Dir != "/b" {
		t.Errorf("block of rank 2: app %d, spec %+v", app, spec)
	}
}

// TestOMPIEnv: an Open MPI process under the PMIx server gets the
// direct-launch marker, the job's scratch directory and the note that the
// launcher applied the binding policy, each unless the user set it (a
// binding policy of the user's own keeps the note out), and the node's
// oversubscription, replacing a value inherited from a spawning parent.
func TestOMPIEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		dir  string
		over bool
		want []string
	}{
		{"defaults", []string{"A=1"}, "/dev/shm/d", false, []string{"A=1", ompiDirectLaunch, ompiOversubEnv + "=0",
			ompiTmpEnv + "=/dev/shm/d", vaderDirEnv + "=/dev/shm/d", ompiBoundEnv + "=1"}},
		{"no scratch directory, oversubscribed", nil, "", true, []string{ompiDirectLaunch, ompiOversubEnv + "=1", ompiBoundEnv + "=1"}},
		{"user's values stand", []string{ompiTmpEnv + "=/x", ompiBoundEnv + "=0"}, "/dev/shm/d", false,
			[]string{ompiTmpEnv + "=/x", ompiBoundEnv + "=0", ompiDirectLaunch, ompiOversubEnv + "=0", vaderDirEnv + "=/dev/shm/d"}},
		{"user's binding policy", []string{ompiBindPolicyEnv + "=core"}, "", false,
			[]string{ompiBindPolicyEnv + "=core", ompiDirectLaunch, ompiOversubEnv + "=0"}},
		{"parent's oversubscription replaced", []string{ompiOversubEnv + "=0", "B=2"}, "", true,
			[]string{"B=2", ompiDirectLaunch, ompiOversubEnv + "=1", ompiBoundEnv + "=1"}},
	} {
		if got := ompiEnv(slices.Clone(tc.env), tc.dir, tc.over); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
