package daemon

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/pmix"
	"github.com/dynrt/dynrt/wire"
)

// TestPMIxSpawnReq: what Open MPI 4.1 passes to PMIx_Spawn becomes the
// master's spawn request: the program as named (found by find when it has
// no slash), the app's environment without the variables that belong to
// the parent's job and node, host/hostfile/wdir info keys in the PMI
// spawn's names (the app's cwd as wdir unless PMIX_WDIR says otherwise),
// mapping policies by node or slot; bad requests are refused with what
// was wrong.
func TestPMIxSpawnReq(t *testing.T) {
	find := func(prog, cwd string) string { return cwd + "/" + prog }
	ompiEnv := []string{"OMPI_PARENT_PORT=1.0:2", ompiTmpEnv + "=/dev/shm/dynrt.node0.j.1", vaderDirEnv + "=/dev/shm/dynrt.node0.j.1",
		"OMPI_MCA_orte_ess_num_procs=1", "OMPI_MCA_orte_precondition_transports=aa-bb", "OMPI_MCA_ess=pmi"}
	for _, tc := range []struct {
		name    string
		job     []pmix.KV
		apps    []pmix.App
		want    *wire.PMISpawnReq
		wantErr string
	}{
		{
			name: "MPI_Comm_spawn of Open MPI 4.1",
			job:  []pmix.KV{{Key: "pmix.pers", Value: "ompi"}},
			apps: []pmix.App{{Cmd: "spawn_tree", Argv: []string{"spawn_tree", "2", "ok"}, Env: ompiEnv, Cwd: "/w", MaxProcs: 2,
				Info: []pmix.KV{{Key: pmixKeyWdir, Value: "/w"}}}},
			want: &wire.PMISpawnReq{Job: "j.1", Rank: 3, Apps: []wire.PMISpawnApp{{
				Argv: []string{"/w/spawn_tree", "2", "ok"}, N: 2, Env: []string{"OMPI_PARENT_PORT=1.0:2", "OMPI_MCA_ess=pmi"},
				Info: []wire.KV{{Key: "wdir", Value: []byte("/w")}},
			}}},
		},
		{
			name: "two apps with hosts, a hostfile, a path and map-by node",
			job:  []pmix.KV{{Key: pmixKeyMapBy, Value: "ppr:1:node"}},
			apps: []pmix.App{
				{Cmd: "./a", Argv: []string{"a", "-x"}, MaxProcs: 1, Cwd: "/c", Info: []pmix.KV{{Key: pmixKeyHost, Value: "node1,node2"}, {Key: pmixKeyWdir, Value: "/elsewhere"}}},
				{Cmd: "/bin/b", MaxProcs: 3, Info: []pmix.KV{{Key: pmixKeyAddHostfile, Value: "hf"}, {Key: "pmix.prefix", Value: "/usr"}}},
			},
			want: &wire.PMISpawnReq{Job: "j.1", Rank: 3, MapBy: wire.MapByNode, Apps: []wire.PMISpawnApp{
				{Argv: []string{"./a", "-x"}, N: 1, Info: []wire.KV{{Key: "host", Value: []byte("node1,node2")}, {Key: "wdir", Value: []byte("/elsewhere")}}},
				{Argv: []string{"/bin/b"}, N: 3, Info: []wire.KV{{Key: "hostfile", Value: []byte("hf")}}},
			}},
		},
		{
			name: "map-by slot in the app's info",
			apps: []pmix.App{{Cmd: "/p", MaxProcs: 1, Info: []pmix.KV{{Key: pmixKeyMapBy, Value: "core:OVERSUBSCRIBE"}}}},
			want: &wire.PMISpawnReq{Job: "j.1", Rank: 3, MapBy: wire.MapBySlot, Apps: []wire.PMISpawnApp{{Argv: []string{"/p"}, N: 1}}},
		},
		{name: "unknown mapping", job: []pmix.KV{{Key: pmixKeyMapBy, Value: "ppr:2:socket"}}, apps: []pmix.App{{Cmd: "/p", MaxProcs: 1}}, wantErr: `mapping policy "ppr:2:socket"`},
		{name: "no program", apps: []pmix.App{{MaxProcs: 1}}, wantErr: "application 0 names no program"},
		{name: "no processes", apps: []pmix.App{{Cmd: "/p"}}, wantErr: "application 0 (/p) asks for 0 processes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pmixSpawnReq("j.1", 3, tc.job, tc.apps, find)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPMIxMapBy(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", wire.MapBySlot}, {"slot", wire.MapBySlot}, {"CORE", wire.MapBySlot}, {"numa:PE=2", wire.MapBySlot},
		{"node", wire.MapByNode}, {"node:OVERSUBSCRIBE", wire.MapByNode}, {"ppr:1:node", wire.MapByNode},
		{"ppr:2:node", ""}, {"seq", ""}, {"dist:mlx5_0", ""},
	} {
		got, err := pmixMapBy(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("pmixMapBy(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestPMIxConnectProcs: a connect's processes as the master's fence
// participants: whole namespaces (a wildcard wins over single ranks) and
// sorted, deduplicated ranks, in namespace order.
func TestPMIxConnectProcs(t *testing.T) {
	w := pmix.RankWildcard
	parts, fence := pmixConnectProcs([]pmix.Proc{{Nspace: "b", Rank: 2}, {Nspace: "a", Rank: w}, {Nspace: "b", Rank: 0}, {Nspace: "b", Rank: 2},
		{Nspace: "c", Rank: 1}, {Nspace: "c", Rank: w}, {Nspace: "c", Rank: 4}})
	wantParts := map[string][]uint32{"a": nil, "b": {0, 2}, "c": nil}
	wantFence := []wire.ProcRanges{{Job: "a"}, {Job: "b", Ranks: wire.RangesOf([]uint32{0, 2})}, {Job: "c"}}
	if !reflect.DeepEqual(parts, wantParts) || !reflect.DeepEqual(fence, wantFence) {
		t.Errorf("got %v %v, want %v %v", parts, fence, wantParts, wantFence)
	}
}

func TestOverrideEnv(t *testing.T) {
	env := []string{"A=1", "B=2", "C=3"}
	got := overrideEnv(env, []string{"B=x", "D=4"})
	if want := []string{"A=1", "C=3", "B=x", "D=4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if !reflect.DeepEqual(env, []string{"A=1", "B=2", "C=3"}) {
		t.Errorf("the shared environment changed: %q", env)
	}
	if got := overrideEnv(env, nil); !reflect.DeepEqual(got, env) {
		t.Errorf("nothing to add: got %q", got)
	}
}
