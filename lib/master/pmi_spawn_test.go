package master

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Spawn placement (the host, hosts and hostfile info keys) and the
// lifetime of spawned jobs, with the protocol-level client of
// pmi_client_test.go.

// spawnNodes returns the sorted node names of a spawned job's processes.
func spawnNodes(t *testing.T, d *testDVM, job string) []string {
	t.Helper()
	var out []string
	for _, p := range d.procs(job) {
		out = append(out, p.Node)
	}
	slices.Sort(out)
	return out
}

// TestPMISpawnHosts: the placement keys put the new processes on the
// nodes they name, through PMI-1 and PMI-2; a host name matches every
// virtual node of this machine.
func TestPMISpawnHosts(t *testing.T) {
	d := startDVM(t, 3, 2)
	wdir := t.TempDir()
	hf := "# spawn hosts\nnode1 slots=9\nnode2:1\n"
	if err := os.WriteFile(filepath.Join(wdir, "hosts"), []byte(hf), 0o600); err != nil {
		t.Fatal(err)
	}
	me, _ := os.Hostname()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"host", []string{"spawnhost", "2", "host", "node2"}, []string{"node2", "node2"}},
		{"hosts list", []string{"spawnhost", "3", "hosts", "node2, node1"}, []string{"node1", "node1", "node2"}},
		{"hostfile", []string{"spawnhost", "4", "hostfile", "hosts"}, []string{"node1", "node1", "node2", "node2"}},
		{"machine host", []string{"spawnhost", "3", "host", me}, []string{"node0", "node1", "node1"}},
		{"pmi2 host", []string{"spawnhost2", "2", "host", "node1"}, []string{"node1", "node1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := pmiReq(t, 1, tt.args...)
			req.Wdir = wdir
			rep, end := d.run(req)
			if end.Code != 0 {
				t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
			}
			x := pmiReports(t, d, rep.Job)[0]
			if s, _ := x["spawn"].(string); !strings.Contains(s, "rc=0") {
				t.Fatalf("spawn reply: %v", x)
			}
			child := childJob(t, d, rep.Job)
			if cend := d.wait(child); cend.Code != 0 {
				t.Fatalf("children ended %d: %s", cend.Code, cend.Msg)
			}
			if got := spawnNodes(t, d, child); !slices.Equal(got, tt.want) {
				t.Errorf("children ran on %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPMISpawnBadHost: a host that is not a node, or a hostfile that
// cannot be read, fails the spawn with an error reply at once; nothing is
// started and the parent goes on.
func TestPMISpawnBadHost(t *testing.T) {
	d := startDVM(t, 2, 2)
	tests := []struct {
		name, want string
		args       []string
	}{
		// PMI-1 values cannot hold blanks: the message has them as '_'.
		{"pmi1 host", `cmd=spawn_result rc=-1 msg=master:_spawn:_executable_0:_host_"elsewhere"_is_not_a_node_of_DVM_`, []string{"spawnhost", "1", "host", "node1,elsewhere"}},
		{"pmi1 hostfile", "cmd=spawn_result rc=-1 msg=master:_spawn:_executable_0:_info_key_hostfile:_", []string{"spawnhost", "1", "hostfile", "/nonexistent/hosts"}},
		{"pmi2 host", `cmd=spawn-response;errmsg=master: spawn: executable 0: host "nowhere" is not a node`, []string{"spawnhost2", "1", "host", "nowhere"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, end := d.run(pmiReq(t, 1, tt.args...))
			if end.Code != 0 {
				t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
			}
			x := pmiReports(t, d, rep.Job)[0]
			if s, _ := x["spawn"].(string); !strings.HasPrefix(s, tt.want) {
				t.Errorf("spawn reply %q\n want prefix %q", s, tt.want)
			}
			if f, _ := x["finalize"].(string); !strings.Contains(f, "finalize") {
				t.Errorf("finalize after the failed spawn: %v", x)
			}
			if err := do(context.Background(), d.m, func(s *state) error {
				for _, j := range s.order {
					if j.pmi != nil && j.pmi.parent == rep.Job {
						t.Errorf("a job was spawned: %s", j.ns)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPMISpawnPath: the info key path is joined to the command as Hydra
// does (path, "/", command), so path "." runs the program of that name
// in the working directory rather than one found in $PATH (MPICH's
// spaconacc spawns "spaconacc" with path ".").
func TestPMISpawnPath(t *testing.T) {
	d := startDVM(t, 1, 4)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wdir, bin := t.TempDir(), t.TempDir()
	for _, dir := range []string{wdir, filepath.Join(wdir, "sub"), bin} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(exe, filepath.Join(dir, "pmichild")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, exe string
		info      []string
	}{
		{"dot", "pmichild", []string{"path", "."}},
		{"relative dir", "pmichild", []string{"path", "sub"}},
		{"dot with wdir", "pmichild", []string{"wdir", "sub", "path", "."}},
		{"absolute dir", "pmichild", []string{"path", bin}},
		{"command with a slash", "sub/pmichild", []string{"path", "."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := pmiReq(t, 1, append([]string{"spawnhost", "1"}, tt.info...)...)
			// $PATH has no pmichild: only the path key finds it.
			req.Env = append(req.Env, "PMI_TEST_EXE="+tt.exe, "PATH=/usr/bin:/bin")
			req.Wdir = wdir
			rep, end := d.run(req)
			if end.Code != 0 {
				t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
			}
			if s, _ := pmiReports(t, d, rep.Job)[0]["spawn"].(string); s != "cmd=spawn_result rc=0" {
				t.Fatalf("spawn reply %q, want success", s)
			}
			child := childJob(t, d, rep.Job)
			if cend := d.wait(child); cend.Code != 0 {
				t.Fatalf("spawned job ended %d: %s", cend.Code, cend.Msg)
			}
			if f, _ := pmiReports(t, d, child)[0]["finalize"].(string); f != "cmd=finalize_ack" {
				t.Errorf("spawned process did not finish its PMI session: %v", pmiReports(t, d, child))
			}
		})
	}
}

// TestPMISpawnOversubscribes: a spawn is never refused for want of free
// slots, as under Hydra (which wraps around its hosts' cores): the new
// processes take the free slots and oversubscribe the rest, even on the
// nodes a host key names and without --oversubscribe.
func TestPMISpawnOversubscribes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"pmi1", []string{"spawnhost", "3"}, []string{"node0", "node1", "node1"}},
		{"pmi1 host", []string{"spawnhost", "2", "host", "node0"}, []string{"node0", "node0"}},
		{"pmi2", []string{"spawnhost2", "2"}, []string{"node0", "node1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startDVM(t, 2, 1)
			rep, end := d.run(pmiReq(t, 1, tt.args...)) // on node0, the only free slot is node1's
			if end.Code != 0 {
				t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
			}
			s, _ := pmiReports(t, d, rep.Job)[0]["spawn"].(string)
			if s != "cmd=spawn_result rc=0" && !strings.HasPrefix(s, "cmd=spawn-response;rc=0;") {
				t.Fatalf("spawn reply %q, want success", s)
			}
			child := childJob(t, d, rep.Job)
			if cend := d.wait(child); cend.Code != 0 {
				t.Fatalf("spawned job ended %d: %s", cend.Code, cend.Msg)
			}
			if got := spawnNodes(t, d, child); !slices.Equal(got, tt.want) {
				t.Errorf("spawned processes ran on %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPMISpawnedOutlivesParent: the parent finalizes and exits while its
// spawned job still runs; job.wait of the parent answers only once the
// spawned job has ended too, and its output has been forwarded by then.
func TestPMISpawnedOutlivesParent(t *testing.T) {
	d := startDVM(t, 2, 2)
	rep, end := d.run(pmiReq(t, 1, "spawnhost", "2", "--", "late", "300ms"))
	if end.Code != 0 || end.State != wire.JobStateDone {
		t.Fatalf("parent ended %s %d: %s", end.State, end.Code, end.Msg)
	}
	child := childJob(t, d, rep.Job)
	var childDone, parentDone bool
	if err := do(context.Background(), d.m, func(s *state) error {
		childDone, parentDone = s.jobs[child].done, s.jobs[rep.Job].done
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !childDone || !parentDone {
		t.Fatalf("job.wait answered with the parent done=%v and the spawned job done=%v", parentDone, childDone)
	}
	// Answered after the flush: both children's reports are here already.
	reps := pmiReports(t, d, child)
	for r := range 2 {
		if reps[r]["finalize"] != "cmd=finalize_ack" {
			t.Errorf("child rank %d: %v", r, reps[r])
		}
	}
	// The parent itself ended long before its children.
	info, err := d.c.Job(context.Background(), wire.JobStateReq{Job: rep.Job})
	if err != nil {
		t.Fatal(err)
	}
	cinfo, err := d.c.Job(context.Background(), wire.JobStateReq{Job: child})
	if err != nil {
		t.Fatal(err)
	}
	if info.Ended >= cinfo.Ended {
		t.Errorf("parent ended at %d, not before its spawned job (%d)", info.Ended, cinfo.Ended)
	}
}

// TestPMISpawnedFailure: a spawned job that fails makes the wait for its
// successful parent report that failure (as mpiexec's exit status does).
func TestPMISpawnedFailure(t *testing.T) {
	d := startDVM(t, 1, 4)
	_, end := d.run(pmiReq(t, 1, "spawnhost", "1", "--", "fail", "5"))
	if end.Code != 5 || !strings.Contains(end.Msg, "exited with code 5") || !strings.Contains(end.Msg, "spawned by job") {
		t.Errorf("parent wait: code %d, msg %q; want 5 and the spawned job's failure", end.Code, end.Msg)
	}
}

// TestPMISpawnedKilledWithParent: killing a job whose parent has already
// ended still reaches the spawned job; killing a running parent kills what
// it spawned.
func TestPMISpawnedKilledWithParent(t *testing.T) {
	d := startDVM(t, 1, 4)
	for _, tc := range []string{"parent ended", "parent running"} {
		t.Run(tc, func(t *testing.T) {
			rep := launchSpawner(t, d, tc == "parent running", "late", "1h")
			d.waitLines(rep.Job, 1) // the parent's report: the spawn is done
			child := childJob(t, d, rep.Job)
			if tc == "parent ended" {
				waitState(t, d, rep.Job, wire.JobStateDone)
			}
			if err := d.c.KillJob(context.Background(), rep.Job, 0, 0); err != nil {
				t.Fatalf("kill: %v", err)
			}
			end := d.wait(rep.Job)
			cend := d.wait(child)
			if cend.State != wire.JobStateKilled {
				t.Errorf("spawned job: %s %d %s; want killed", cend.State, cend.Code, cend.Msg)
			}
			if end.Code == 0 {
				t.Errorf("parent wait reported success after the kill: %s %s", end.State, end.Msg)
			}
		})
	}
}

// TestPMISpawnedAbortEndsTree: an abort in a spawned job ends the whole
// spawn tree, from the job the launcher started, with the abort's code,
// as mpiexec exits at once with it (MPICH's concurrent_spawns had a
// child abort while its parent waited, and dynrun hung).
func TestPMISpawnedAbortEndsTree(t *testing.T) {
	d := startDVM(t, 1, 4)
	for _, tc := range []string{"parent running", "parent finalized"} {
		t.Run(tc, func(t *testing.T) {
			rep := launchSpawner(t, d, tc == "parent running", "abort", "7")
			end := d.wait(rep.Job)
			if end.Code != 7 {
				t.Errorf("parent wait: %s %d %q; want code 7", end.State, end.Code, end.Msg)
			}
			if tc == "parent running" && (end.Reason != wire.JobEndAbort || !strings.Contains(end.Msg, "called abort")) {
				t.Errorf("parent ended %s %q (%s); want aborted by its spawned job", end.State, end.Msg, end.Reason)
			}
			cend := d.wait(childJob(t, d, rep.Job))
			if cend.Code != 7 || cend.Reason != wire.JobEndAbort {
				t.Errorf("spawned job: %s %d %q; want aborted with 7", cend.State, cend.Code, cend.Msg)
			}
		})
	}
}

// waitState polls until job is in state st (job.wait would wait for the
// jobs it spawned as well).
func waitState(t *testing.T, d *testDVM, job, st string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := d.c.Job(context.Background(), wire.JobStateReq{Job: job})
		if err != nil {
			t.Fatal(err)
		}
		if info.State == st {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, not %s", job, info.State, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// launchSpawner launches a PMI test process that spawns one child running
// child; with hold, the parent sleeps after the spawn instead of ending.
func launchSpawner(t *testing.T, d *testDVM, hold bool, child ...string) wire.JobLaunchReply {
	t.Helper()
	req := pmiReq(t, 1, append([]string{"spawnhost", "1", "--"}, child...)...)
	if hold {
		req.Env = append(req.Env, "PMI_TEST_HOLD=1")
	}
	rep, err := d.launch(req)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
