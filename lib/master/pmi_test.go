package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pmi"
	"github.com/dynrt/dynrt/wire"
)

// The PMI service end to end: the test binary plays a PMI client
// (pmi_client_test.go) under a DVM of virtual nodes, speaking the exact
// lines of shared/pmi-wire.md. pmi_mpi_test.go runs real MPICH programs.

// pmiReq is a launch of the PMI test client.
func pmiReq(t *testing.T, n uint32, args ...string) wire.JobLaunchReq {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return wire.JobLaunchReq{Argv: append([]string{exe}, args...), N: n, Env: []string{envRole + "=pmi"}}
}

// pmiReports returns the client reports of a job by rank.
func pmiReports(t *testing.T, d *testDVM, job string) map[int]map[string]any {
	t.Helper()
	out := map[int]map[string]any{}
	for _, l := range d.output(job) {
		s, ok := strings.CutPrefix(string(l.Line), "pmi ")
		if !ok {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("bad report %q: %v", s, err)
		}
		out[int(r["rank"].(float64))] = r
	}
	return out
}

// placementNodes gives each rank the index of its node in pl, in order of
// first appearance (how a PMI mapping numbers nodes).
func placementOf(pl []wire.Placement) []int {
	n := 0
	for _, p := range pl {
		n += p.Ranks.Count()
	}
	node := make([]int, n)
	for i, p := range pl {
		for r := range p.Ranks.All() {
			node[r] = i
		}
	}
	ids := map[int]int{}
	for r, x := range node {
		if _, ok := ids[x]; !ok {
			ids[x] = len(ids)
		}
		node[r] = ids[x]
	}
	return node
}

func nodeOfRank(pl []wire.Placement, rank uint32) string {
	for _, p := range pl {
		if p.Ranks.Contains(rank) {
			return p.Node
		}
	}
	return ""
}

// checkMapping parses a PMI mapping the way MPICH does and compares it
// with the placement.
func checkMapping(t *testing.T, value string, pl []wire.Placement) {
	t.Helper()
	want := placementOf(pl)
	got, err := pmi.ParseMapping(value, len(want))
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("mapping %q reads as %v, %v; placement %v", value, got, err, want)
	}
}

// TestPMI1KV: PMI-1 init .. finalize on one and four nodes, in PMI_FD and
// PMI_PORT mode; a put on one node is got on another after the barrier.
func TestPMI1KV(t *testing.T) {
	cases := []struct {
		name         string
		nodes, slots int
		n            uint32
		mapBy, mode  string
		usize        int32
		universe     int // -1: unset, as under Hydra by default
	}{
		{"1 node", 1, 4, 4, "", "", 0, -1},
		{"4 nodes by node", 4, 2, 7, wire.MapByNode, wire.PMIAuto, wire.UniverseSlots, 8},
		{"4 nodes port mode", 4, 2, 5, "", wire.PMIPort, 12, 12},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := startDVM(t, tc.nodes, tc.slots)
			req := pmiReq(t, tc.n, "kv")
			req.MapBy, req.PMI, req.Universe = tc.mapBy, tc.mode, tc.usize
			rep, end := d.run(req)
			if end.Code != 0 {
				t.Fatalf("job ended %+v: %s", end.Code, end.Msg)
			}
			reps := pmiReports(t, d, rep.Job)
			if len(reps) != int(tc.n) {
				t.Fatalf("%d reports, want %d: %v", len(reps), tc.n, reps)
			}
			for r, x := range reps {
				next := (r + 1) % int(tc.n)
				want := map[string]any{
					"maxes":    "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
					"appnum":   "cmd=appnum appnum=0",
					"kvsname":  "cmd=my_kvsname kvsname=kvs_" + rep.Job,
					"universe": fmt.Sprintf("cmd=universe_size size=%d", tc.universe),
					"put":      "cmd=put_result rc=0 msg=success",
					"barrier":  "cmd=barrier_out",
					"next":     fmt.Sprintf("cmd=get_result rc=0 msg=success value=v-%d=x", next),
					"missing":  "cmd=get_result rc=-1 msg=key_missing_not_found value=unknown",
					"barrier2": "cmd=barrier_out",
					"finalize": "cmd=finalize_ack",
					"size":     float64(tc.n),
				}
				if tc.mode == wire.PMIPort {
					want["initack"] = fmt.Sprintf("cmd=initack|cmd=set size=%d|cmd=set rank=%d|cmd=set debug=0", tc.n, r)
				}
				for k, v := range want {
					if x[k] != v {
						t.Errorf("rank %d: %s = %v, want %v", r, k, x[k], v)
					}
				}
				m, ok := strings.CutPrefix(x["mapping"].(string), "cmd=get_result rc=0 msg=success value=")
				if !ok {
					t.Fatalf("rank %d: mapping reply %q", r, x["mapping"])
				}
				checkMapping(t, m, rep.Placement)
			}
			// A job whose processes spoke PMI is static.
			var static error
			if err := do(context.Background(), d.m, func(s *state) error {
				static = s.jobs[rep.Job].staticErr()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(static, wire.ErrState) || !strings.Contains(static.Error(), "launched as an MPI job without dynrt's session API") {
				t.Errorf("staticErr = %v", static)
			}
		})
	}
}

// TestPMI2 runs the PMI-2 client with the MPICH 4.0.x framing quirks:
// fullinit, job attributes, kvs put/fence/get across nodes, node
// attributes with wait, thrid echo.
func TestPMI2(t *testing.T) {
	d := startDVM(t, 4, 2)
	req := pmiReq(t, 6, "pmi2")
	req.Universe = wire.UniverseSlots
	rep, end := d.run(req)
	if end.Code != 0 {
		t.Fatalf("job ended %d: %s", end.Code, end.Msg)
	}
	reps := pmiReports(t, d, rep.Job)
	if len(reps) != 6 {
		t.Fatalf("%d reports: %v", len(reps), reps)
	}
	local := map[string]int{}
	for r := range uint32(6) {
		x := reps[int(r)]
		node := nodeOfRank(rep.Placement, r)
		next := (r + 1) % 6
		want := map[string]string{
			"init":     "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0",
			"fullinit": fmt.Sprintf("cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=%d;size=6;appnum=0;debugged=FALSE;pmiverbose=FALSE;rc=0;", r),
			"jobid":    "cmd=job-getid-response;jobid=kvs_" + rep.Job + ";rc=0;",
			"mapping":  "cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,3,2));rc=0;",
			"universe": "cmd=info-getjobattr-response;found=TRUE;value=8;rc=0;",
			"put":      "cmd=kvs-put-response;rc=0;",
			"fence":    "cmd=kvs-fence-response;rc=0;thrid=0x1234;",
			"next":     fmt.Sprintf("cmd=kvs-get-response;found=TRUE;value=v;;%d;rc=0;", next),
			"fence2":   "cmd=kvs-fence-response;rc=0;",
			"finalize": "cmd=finalize-response;rc=0;",
		}
		if local[node] == 0 {
			want["nodeattr"] = "cmd=info-putnodeattr-response;rc=0;"
		} else {
			want["nodeattr"] = "cmd=info-getnodeattr-response;found=TRUE;value=seg-of-" + node + ";rc=0;"
		}
		local[node]++
		for k, v := range want {
			if x[k] != v {
				t.Errorf("rank %d: %s = %v\n want %v", r, k, x[k], v)
			}
		}
	}
}

// childJob returns the job a spawn from parent created.
func childJob(t *testing.T, d *testDVM, parent string) string {
	t.Helper()
	var child string
	if err := do(context.Background(), d.m, func(s *state) error {
		for _, j := range s.order {
			if j.pmi != nil && j.pmi.parent == parent {
				child = j.ns
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if child == "" {
		t.Fatalf("no job spawned by %s", parent)
	}
	return child
}

// TestPMI1Spawn: mcmd=spawn with two executable blocks, arguments with
// spaces and '=', a preput key, the wdir info key: a new job whose
// processes see all of it.
func TestPMI1Spawn(t *testing.T) {
	d := startDVM(t, 2, 4)
	wdir := t.TempDir()
	req := pmiReq(t, 1, "spawn1")
	req.Env = append(req.Env, "PMI_TEST_WDIR="+wdir)
	rep, end := d.run(req)
	if end.Code != 0 {
		t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
	}
	if x := pmiReports(t, d, rep.Job)[0]; x["spawn"] != "cmd=spawn_result rc=0" || x["finalize"] != "cmd=finalize_ack" {
		t.Fatalf("parent: %v", x)
	}
	child := childJob(t, d, rep.Job)
	cend := d.wait(child)
	if cend.Code != 0 {
		t.Fatalf("children ended %d: %s", cend.Code, cend.Msg)
	}
	reps := pmiReports(t, d, child)
	if len(reps) != 3 {
		t.Fatalf("%d child reports: %v", len(reps), reps)
	}
	cwd, _ := os.Getwd()
	for r, x := range reps {
		args, appnum, dir := []any{"a b c", "x=y"}, "0", wdir
		if r == 2 {
			args, appnum, dir = []any{"second"}, "1", cwd
		}
		want := map[string]any{
			"size":     float64(3),
			"args":     args,
			"cwd":      dir,
			"spawned":  "1",
			"appnum":   "cmd=appnum appnum=" + appnum,
			"kvsname":  "cmd=my_kvsname kvsname=kvs_" + child,
			"parent":   "cmd=get_result rc=0 msg=success value=tag#0$connentry#0200A5B4$",
			"barrier":  "cmd=barrier_out",
			"finalize": "cmd=finalize_ack",
		}
		for k, v := range want {
			if !reflect.DeepEqual(x[k], v) {
				t.Errorf("child rank %d: %s = %v, want %v", r, k, x[k], v)
			}
		}
	}
}

// TestPMI2Spawn: the PMI-2 spawn command; the children learn their parent
// from spawner-jobid and find the preput key.
func TestPMI2Spawn(t *testing.T) {
	d := startDVM(t, 2, 2)
	rep, end := d.run(pmiReq(t, 1, "spawn2"))
	if end.Code != 0 {
		t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
	}
	child := childJob(t, d, rep.Job)
	if x := pmiReports(t, d, rep.Job)[0]; x["spawn"] != "cmd=spawn-response;rc=0;jobid=kvs_"+child+";nerrs=0;" {
		t.Fatalf("parent: %v", x)
	}
	if cend := d.wait(child); cend.Code != 0 {
		t.Fatalf("children ended %d: %s", cend.Code, cend.Msg)
	}
	reps := pmiReports(t, d, child)
	if len(reps) != 2 {
		t.Fatalf("child reports: %v", reps)
	}
	for r, x := range reps {
		want := map[string]any{
			"fullinit": fmt.Sprintf("cmd=fullinit-response;pmi-version=2;pmi-subversion=0;rank=%d;size=2;appnum=0;spawner-jobid=kvs_%s;debugged=FALSE;pmiverbose=FALSE;rc=0;", r, rep.Job),
			"args":     []any{"p q"},
			"parent":   "cmd=kvs-get-response;found=TRUE;value=port;;2;rc=0;",
			"finalize": "cmd=finalize-response;rc=0;",
		}
		for k, v := range want {
			if !reflect.DeepEqual(x[k], v) {
				t.Errorf("child rank %d: %s = %v\n want %v", r, k, x[k], v)
			}
		}
	}
}

// TestPMISpawnMissingProgram: a spawn whose program does not exist is
// answered with per-process error codes; the parent goes on.
func TestPMISpawnMissingProgram(t *testing.T) {
	d := startDVM(t, 1, 4)
	rep, end := d.run(pmiReq(t, 1, "spawnbad"))
	if end.Code != 0 {
		t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
	}
	if x := pmiReports(t, d, rep.Job)[0]; x["spawn"] != "cmd=spawn_result rc=0 errcodes=127,127" {
		t.Errorf("spawn reply: %v", x)
	}
}

// TestPMIAbort: cmd=abort kills the job with that exit code.
func TestPMIAbort(t *testing.T) {
	d := startDVM(t, 2, 2)
	_, end := d.run(pmiReq(t, 3, "abort", "7"))
	if end.Code != 7 || end.State != wire.JobStateKilled || !strings.Contains(end.Msg, "rank 0 called abort") {
		t.Errorf("end = %d %s: %s; want 7, killed, by rank 0's abort", end.Code, end.State, end.Msg)
	}
}

// TestPMIUnfinished: a process that exits 0 after init without finalize
// fails the job, whose other processes wait in a barrier, as under Hydra.
func TestPMIUnfinished(t *testing.T) {
	d := startDVM(t, 2, 2)
	_, end := d.run(pmiReq(t, 3, "eof"))
	if end.Code != 1 || end.State != wire.JobStateFailed || !strings.Contains(end.Msg, "rank 1 on") || !strings.Contains(end.Msg, "without finalizing PMI") {
		t.Errorf("end = %d %s: %s", end.Code, end.State, end.Msg)
	}
}

// TestPMIDeadProcesses: in a keep-going job (Hydra's
// -disable-auto-cleanup), processes that leave PMI without finalize do
// not end the job: every other process, on both daemons, gets SIGUSR1 and
// reads the dead ranks, in order of death, from PMI_dead_processes at once
// (PMI-1 get, PMI-2 kvs-get and info-getjobattr), as MPICH's fault
// tolerance does; the job ends when its processes have, with the victims'
// exit status.
func TestPMIDeadProcesses(t *testing.T) {
	d := startDVM(t, 2, 3)
	for _, tc := range []struct{ name, proto, finalize string }{
		{"PMI-1", "1", "cmd=finalize_ack"},
		{"PMI-2", "2", "cmd=finalize-response;rc=0;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := pmiReq(t, 6, "ft", tc.proto)
			req.KeepGoing, req.MapBy = true, wire.MapByNode // ranks 0,2,4 on node0; 1,3,5 on node1
			rep, end := d.run(req)
			if end.Code != 1 || end.State != wire.JobStateFailed || end.Reason != wire.JobEndNone {
				t.Errorf("end = %d %s %q: %s; want 1, failed, not killed", end.Code, end.State, end.Reason, end.Msg)
			}
			reps := pmiReports(t, d, rep.Job)
			for _, r := range []int{0, 2, 4, 5} {
				x := reps[r]
				if x == nil {
					t.Errorf("rank %d (on %s) did not report", r, nodeOfRank(rep.Placement, uint32(r)))
					continue
				}
				// Two signals may arrive as one: then only the final list.
				seen := fmt.Sprint(x["seen"])
				if (seen != "[1 1,3]" && seen != "[1,3]") || x["timeout"] != nil || x["finalize"] != tc.finalize {
					t.Errorf("rank %d on %s read %s (timeout %v, finalize %v), want [1 1,3] or [1,3]",
						r, nodeOfRank(rep.Placement, uint32(r)), seen, x["timeout"], x["finalize"])
				}
				if tc.proto == "2" && x["jobattr"] != "cmd=info-getjobattr-response;found=TRUE;value=1,3;rc=0;" {
					t.Errorf("rank %d: info-getjobattr answered %v", r, x["jobattr"])
				}
			}
		})
	}
}

// TestPMIDeadFailsFirst: a rank reported dead through PMI is the job's
// first failure even when a process told of it fails before its exit is
// booked (MPICH's ch3 may crash in MPI_Finalize on the notification): the
// job's status is the dead rank's, as under Hydra.
func TestPMIDeadFailsFirst(t *testing.T) {
	d := startDVM(t, 2, 2)
	req := pmiReq(t, 4, "ftorder")
	req.KeepGoing = true
	_, end := d.run(req)
	if end.Code != 1 || end.Failure != wire.FailExit || !strings.Contains(end.Msg, "rank 1 on") {
		t.Errorf("end = %d (%s): %s; want rank 1's exit status 1", end.Code, end.Failure, end.Msg)
	}
}

// TestPMIMalformed: malformed requests get error replies and the session
// goes on; a broken PMI-2 frame ends the session and fails the job
// cleanly; the daemon serves the next job as before.
func TestPMIMalformed(t *testing.T) {
	d := startDVM(t, 2, 2)
	rep, end := d.run(pmiReq(t, 2, "garbage"))
	if end.Code != 0 {
		t.Fatalf("garbage job ended %d: %s", end.Code, end.Msg)
	}
	for r, x := range pmiReports(t, d, rep.Job) {
		want := map[string]any{
			"garbage":  `cmd=error rc=-1 msg=pmi:_token_"garbage"_is_not_key=value`,
			"unknown":  "cmd=error rc=-1 msg=unknown_command_frobnicate",
			"badkvs":   "cmd=get_result rc=-1 msg=key_a_not_found value=unknown",
			"finalize": "cmd=finalize_ack",
		}
		for k, v := range want {
			if x[k] != v {
				t.Errorf("rank %d: %s = %v, want %v", r, k, x[k], v)
			}
		}
	}
	rep, end = d.run(pmiReq(t, 2, "badframe"))
	if end.Code != 1 || end.State != wire.JobStateFailed || !strings.Contains(end.Msg, "PMI") {
		t.Errorf("badframe job: %d %s: %s", end.Code, end.State, end.Msg)
	}
	for r, x := range pmiReports(t, d, rep.Job) {
		if x["after"] != "EOF" {
			t.Errorf("rank %d: after the broken frame: %v, want EOF (the daemon hangs up)", r, x["after"])
		}
	}
	if _, end := d.run(pmiReq(t, 4, "kv")); end.Code != 0 {
		t.Errorf("next job ended %d: %s", end.Code, end.Msg)
	}
}

// TestPMIEnvironment: the variables of each mode; --pmi none removes
// inherited ones; a job that never speaks PMI stays dynamic.
func TestPMIEnvironment(t *testing.T) {
	d := startDVM(t, 1, 2)
	show := sh(`echo "fd=${PMI_FD:-unset} rank=${PMI_RANK:-unset} size=${PMI_SIZE:-unset} port=${PMI_PORT:+set} id=${PMI_ID:+set} lr=${MPI_LOCALRANKID:-unset}/${MPI_LOCALNRANKS:-unset} spawned=${PMI_SPAWNED:-unset}"`)
	for _, tc := range []struct{ mode, want string }{
		{"", "fd=3 rank=%d size=2 port= id= lr=%d/2 spawned=unset"},
		{wire.PMIPort, "fd=unset rank=%d size=2 port=set id=set lr=%d/2 spawned=unset"},
		{wire.PMINone, "fd=unset rank=unset size=unset port= id= lr=unset/unset spawned=unset"},
	} {
		req := wire.JobLaunchReq{Argv: show, N: 2, PMI: tc.mode, Env: []string{"PMI_FD=9", "PMI_SPAWNED=1", "PMI_RANK=5"}}
		rep, end := d.run(req)
		if end.Code != 0 {
			t.Fatalf("%q: %d %s", tc.mode, end.Code, end.Msg)
		}
		var got []string
		for _, l := range d.output(rep.Job) {
			got = append(got, string(l.Line))
		}
		slices.Sort(got)
		want := []string{tc.want, tc.want}
		if strings.Contains(tc.want, "%d") {
			want = []string{fmt.Sprintf(tc.want, 0, 0), fmt.Sprintf(tc.want, 1, 1)}
		}
		if !slices.Equal(got, want) {
			t.Errorf("mode %q: %q, want %q", tc.mode, got, want)
		}
		var static error
		_ = do(context.Background(), d.m, func(s *state) error { static = s.jobs[rep.Job].staticErr(); return nil })
		if static != nil {
			t.Errorf("mode %q: a job that never spoke PMI is static: %v", tc.mode, static)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.c.Launch(ctx, wire.JobLaunchReq{Argv: show, N: 1, PMI: "bogus"}); !errors.Is(err, wire.ErrInvalid) {
		t.Errorf("unknown PMI mode: %v", err)
	}
}

// TestRCRefusedForPMIJob: a resource change on a running job whose processes
// spoke PMI is refused with the static-job error, and one on a job that
// never did is not refused for that reason.
func TestRCRefusedForPMIJob(t *testing.T) {
	var s state
	tests := []struct {
		name   string
		pmi    *pmiJob
		static bool
	}{
		{"no PMI", nil, false},
		{"PMI offered, never used", &pmiJob{}, false},
		{"PMI used", &pmiJob{used: true}, true},
	}
	for _, tt := range tests {
		j := &job{ns: "d.1", app: "hello", launched: true, pmi: tt.pmi}
		err := s.rcJobOK(j)
		got := err != nil && strings.Contains(err.Error(), "launched as an MPI job without dynrt's session API")
		if got != tt.static {
			t.Errorf("%s: rcJobOK = %v, want static refusal %v", tt.name, err, tt.static)
		}
		if err != nil && !errors.Is(err, wire.ErrState) {
			t.Errorf("%s: error %v does not carry the state code", tt.name, err)
		}
	}
}
