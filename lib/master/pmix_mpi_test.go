//go:build pmix

package master

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Open MPI programs (testdata/mpi built with Debian's mpicc.openmpi) and
// PMIx clients (testdata/pmix) under the daemons' PMIx server, --pmi
// pmix, on a DVM of virtual nodes. `make test` installs libopenmpi-dev
// and libpmix-dev first.

// ompiBuilt records the testdata/mpi programs built with Open MPI so far
// (some of testdata/mpi is MPICH's: MPI-4 sessions, MPIX fault
// tolerance), each built on first use into ompiBuild.dir.
var ompiBuilt struct {
	sync.Mutex
	err map[string]error
}

// ompiProgram returns the path of a testdata/mpi program built with Open
// MPI, skipping the test when Open MPI is missing.
func ompiProgram(t *testing.T, name string) string {
	t.Helper()
	cc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		t.Skipf("Open MPI is not installed (no mpicc.openmpi): install the Debian packages openmpi-bin and libopenmpi-dev (make test does)")
	}
	ompiBuild.once.Do(func() { ompiBuild.dir, ompiBuild.err = os.MkdirTemp(os.TempDir(), "dynrt-ompi-build-") })
	if ompiBuild.err != nil {
		t.Fatal(ompiBuild.err)
	}
	out := filepath.Join(ompiBuild.dir, name)
	ompiBuilt.Lock()
	defer ompiBuilt.Unlock()
	err, done := ompiBuilt.err[name]
	if !done {
		src := filepath.Join("..", "..", "testdata", "mpi", name+".c")
		if b, cerr := exec.Command(cc, "-O1", "-o", out, src).CombinedOutput(); cerr != nil {
			err = fmt.Errorf("%s %s: %v\n%s", cc, src, cerr, b)
		}
		if ompiBuilt.err == nil {
			ompiBuilt.err = map[string]error{}
		}
		ompiBuilt.err[name] = err
	}
	if err != nil {
		t.Fatalf("building %s with Open MPI: %v", name, err)
	}
	return out
}

// pmixProgram returns the path of a testdata/pmix client, built against
// libpmix (pkg-config pmix).
func pmixProgram(t *testing.T, name string) string {
	t.Helper()
	pmixBuild.once.Do(func() {
		flags, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
		if err != nil {
			pmixBuild.err = fmt.Errorf("pkg-config pmix: %v", err)
			return
		}
		pmixBuild.dir, pmixBuild.err = buildProgs("cc", "../../testdata/pmix/*.c", append([]string{"-I../../libdynrt/include"}, strings.Fields(string(flags))...)...)
	})
	if pmixBuild.err != nil {
		t.Fatalf("building the PMIx test clients: %v", pmixBuild.err)
	}
	return filepath.Join(pmixBuild.dir, name)
}

// mpirunOMPI runs prog under Open MPI's own launcher, for comparison, and
// returns its sorted stdout lines and exit code; it skips when
// mpirun.openmpi is missing.
func mpirunOMPI(t *testing.T, n int, args ...string) ([]string, int) {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun.openmpi")
	if err != nil {
		t.Skip("no mpirun.openmpi to compare with (Debian package openmpi-bin)")
	}
	cmd := exec.Command(mpirun, append([]string{"--allow-run-as-root", "--oversubscribe", "-n", strconv.Itoa(n)}, args...)...)
	cmd.Env = append(os.Environ(), envMark+"=mpirun-"+t.Name())
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(lines)
	return lines, cmd.ProcessState.ExitCode()
}

// checkScratchGone: the job's scratch directories (lib/daemon/pmix.go),
// where Open MPI keeps its session directory and shared memory, are gone
// with it.
func checkScratchGone(t *testing.T, job string) {
	t.Helper()
	left, _ := filepath.Glob("/dev/shm/dynrt.*." + job)
	if len(left) > 0 {
		t.Errorf("left in /dev/shm: %v", left)
	}
}

// TestOMPIHello: rank, size, appnum and universe of an Open MPI program
// on 1 and 4 virtual nodes, as under mpirun.openmpi; the job becomes
// static once its processes have connected (as a PMI job does).
func TestOMPIHello(t *testing.T) {
	prog := ompiProgram(t, "hello_mpi")
	for _, tc := range []struct {
		nodes, slots, n int
		usize           int32
		universe        int
	}{{1, 4, 1, 0, 1}, {1, 4, 4, wire.UniverseSlots, 4}, {4, 2, 8, 0, 8}} {
		t.Run(fmt.Sprintf("%dx%d/n=%d", tc.nodes, tc.slots, tc.n), func(t *testing.T) {
			d := startDVM(t, tc.nodes, tc.slots)
			rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog, strconv.Itoa(tc.n)}, N: uint32(tc.n), Universe: tc.usize, PMI: wire.PMIPMIx})
			if end.Code != 0 {
				t.Fatalf("job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, rep.Job))
			}
			checkLines(t, "", lines(d, rep.Job), helloWant(tc.n, tc.universe))
			var static error
			if err := do(t.Context(), d.m, func(s *state) error { static = s.jobs[rep.Job].staticErr(); return nil }); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(static, wire.ErrState) {
				t.Errorf("staticErr = %v, want the refusal of a job whose processes spoke PMIx", static)
			}
			checkScratchGone(t, rep.Job)
		})
	}
	// mpirun.openmpi prints the same lines for rank, size and appnum (its
	// universe is its slot count, which differs).
	got, code := mpirunOMPI(t, 4, prog, "4")
	for r, l := range got {
		if code != 0 || !strings.HasPrefix(l, fmt.Sprintf("hello rank=%d size=4 appnum=0 universe=", r)) {
			t.Errorf("mpirun.openmpi: exit %d, line %q", code, l)
		}
	}
}

// TestOMPIWarmDVM: one DVM runs Open MPI jobs of 28 processes one after
// the other, all to the end. Deregistering each PMIx client as its
// process exited left libpmix with events on closed sockets: a later
// job's processes hung in PMIx_Init (within a dozen jobs here; at the 4th
// to 6th under dynrun dvm start).
func TestOMPIWarmDVM(t *testing.T) {
	prog := ompiProgram(t, "hello_mpi")
	d := startDVM(t, 1, 28)
	for i := range 12 {
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "28"}, N: 28, PMI: wire.PMIPMIx})
		if end.Code != 0 {
			t.Fatalf("job %d ended %d: %s\n%s", i, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		checkLines(t, fmt.Sprintf("job %d: ", i), lines(d, rep.Job), helloWant(28, 28))
	}
}

// TestOMPIAllreduce: collectives and point-to-point of an Open MPI
// program across 4 virtual nodes (a fence of every node through the
// master; shared memory within a node, TCP between nodes).
func TestOMPIAllreduce(t *testing.T) {
	prog := ompiProgram(t, "allreduce")
	d := startDVM(t, 4, 2)
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: 8, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
	if end.Code != 0 {
		t.Fatalf("job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, rep.Job))
	}
	checkAllreduce(t, "pmix", lines(d, rep.Job))
	checkScratchGone(t, rep.Job)
}

// TestOMPISplitType: MPI_Comm_split_type(SHARED) of Open MPI groups
// exactly the ranks of one virtual node (PMIx local peers), for block and
// round-robin placements.
func TestOMPISplitType(t *testing.T) {
	prog := ompiProgram(t, "split")
	d := startDVM(t, 4, 3)
	for _, tc := range []struct {
		mapBy string
		n     uint32
	}{{wire.MapBySlot, 7}, {wire.MapByNode, 10}} {
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: tc.n, MapBy: tc.mapBy, PMI: wire.PMIPMIx})
		if end.Code != 0 {
			t.Fatalf("%s: job ended %d: %s\n%s", tc.mapBy, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		checkLines(t, fmt.Sprintf("%s (placement %v): ", tc.mapBy, rep.Placement), lines(d, rep.Job), splitWant(rep.Placement, tc.n))
	}
}

// TestOMPIBindingNote: the daemons tell Open MPI that the launcher has
// applied the binding policy (OMPI_MCA_orte_bound_at_launch), as
// mpirun.openmpi does, so no rank reads the node's topology in MPI_Init
// and hwloc loads none of its plugins (libxml2, ICU, X11, OpenCL: about
// twice the dynamic linking of an Open MPI start-up). Without the note
// every rank loads 4 plugins here. (A binding policy of the user's own
// keeps the note out: lib/daemon TestOMPIEnv.)
func TestOMPIBindingNote(t *testing.T) {
	prog := ompiProgram(t, "hwloc_plugins")
	for _, nodes := range []int{1, 2} {
		d := startDVM(t, nodes, 4)
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: 4, PMI: wire.PMIPMIx})
		if end.Code != 0 {
			t.Fatalf("%d nodes: job ended %d: %s\n%s", nodes, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		got := lines(d, rep.Job)
		if len(got) != 4 {
			t.Fatalf("%d nodes: want 4 lines, got %q", nodes, got)
		}
		for _, l := range got {
			var rank, n int
			if _, err := fmt.Sscanf(l, "hwloc_plugins rank=%d n=%d", &rank, &n); err != nil {
				t.Fatalf("%d nodes: line %q: %v", nodes, l, err)
			}
			if n != 0 {
				t.Errorf("%d nodes: rank %d loaded %d of hwloc's plugins in MPI_Init, want none", nodes, rank, n)
			}
		}
	}
}

// TestOMPIOversubscribed: Open MPI yields the CPU while it waits
// (mpi_yield_when_idle, read through MPI_T) exactly when more processes
// run on the node than it has CPUs, as under mpirun.openmpi. (A spawned
// child's value is its own, not its parent's: lib/daemon TestOMPIEnv.)
func TestOMPIOversubscribed(t *testing.T) {
	prog := ompiProgram(t, "yield_idle")
	cpus := runtime.NumCPU()
	d := startDVM(t, 1, cpus+2)
	for _, tc := range []struct {
		n     int
		yield int
	}{{cpus, 0}, {cpus + 1, 1}} {
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: uint32(tc.n), PMI: wire.PMIPMIx})
		if end.Code != 0 {
			t.Fatalf("n=%d: job ended %d: %s\n%s", tc.n, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		var want []string
		for r := range tc.n {
			want = append(want, fmt.Sprintf("yield rank=%d v=%d", r, tc.yield))
		}
		slices.Sort(want)
		checkLines(t, fmt.Sprintf("%d processes on %d CPUs: ", tc.n, cpus), lines(d, rep.Job), want)
		if _, err := exec.LookPath("mpirun.openmpi"); err == nil {
			if got, code := mpirunOMPI(t, tc.n, prog); code != 0 || !slices.Equal(got, want) {
				t.Errorf("mpirun.openmpi -n %d: exit %d, output %q, want %q", tc.n, code, got, want)
			}
		}
	}
}

// TestOMPIAbort: MPI_Abort(MPI_COMM_WORLD, 7) of Open MPI ends the job
// with code 7 on 1 and 2 virtual nodes, as mpirun.openmpi exits 7.
func TestOMPIAbort(t *testing.T) {
	prog := ompiProgram(t, "abort")
	for _, nodes := range []int{1, 2} {
		d := startDVM(t, nodes, 4)
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "7"}, N: 4, PMI: wire.PMIPMIx})
		checkAbort(t, fmt.Sprintf("%d nodes: ", nodes), end, lines(d, rep.Job))
		checkScratchGone(t, rep.Job)
	}
	got, code := mpirunOMPI(t, 4, prog, "7")
	if code != 7 || !slices.Contains(got, "abort rank=0 code=7") {
		t.Errorf("mpirun.openmpi: exit %d, output %q", code, got)
	}
}

// TestOMPIPublishLookup: MPI_Publish_name in one Open MPI job,
// MPI_Lookup_name in another (the DVM-wide name service, as for MPICH),
// a second publish of a taken name refused, an unknown name not found,
// names gone once unpublished.
func TestOMPIPublishLookup(t *testing.T) {
	prog := ompiProgram(t, "pubsub")
	d := startDVM(t, 2, 4)
	name := "svc-" + d.mark
	srv, err := d.launch(wire.JobLaunchReq{Argv: []string{prog, "server", name}, N: 2, PMI: wire.PMIPMIx})
	if err != nil {
		t.Fatal(err)
	}
	cli, cend := d.run(wire.JobLaunchReq{Argv: []string{prog, "client", name}, N: 2, PMI: wire.PMIPMIx})
	send := d.wait(srv.Job)
	if send.Code != 0 || cend.Code != 0 {
		t.Fatalf("server %d (%s), client %d (%s)\n%s%s", send.Code, send.Msg, cend.Code, cend.Msg, stderrOf(d, srv.Job), stderrOf(d, cli.Job))
	}
	checkLines(t, "client ", lines(d, cli.Job), []string{"pubsub client done", "pubsub client found " + name + "=port-of-" + name})
	checkLines(t, "server ", lines(d, srv.Job), []string{"pubsub server got " + name + "-ack=thanks", "pubsub server published " + name, "pubsub server second publish of " + name + " refused"})
}

// TestPMIxFence: a plain PMIx client (testdata/pmix/fence_client.c) puts
// a value per rank, fences with data collection and reads every rank's
// value, on 1 node (libpmix completes the fence alone) and across 4
// virtual nodes (each daemon's contribution through the master's fence).
func TestPMIxFence(t *testing.T) {
	prog := pmixProgram(t, "fence_client")
	for _, nodes := range []int{1, 4} {
		d := startDVM(t, nodes, 2)
		n := 2 * nodes
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: uint32(n), MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
		if end.Code != 0 {
			t.Fatalf("%d nodes: job ended %d: %s\n%s", nodes, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		var want []string
		for r := range n {
			want = append(want, fmt.Sprintf("rank %d of %d (2 local): got %d values", r, n, n))
		}
		checkLines(t, fmt.Sprintf("%d nodes: ", nodes), lines(d, rep.Job), want)
	}
}

// TestPMIxDirectModex: with a fence that collects nothing, a PMIx
// client's Get of a rank of another node reaches that rank's daemon (the
// owner's server gives its data, through the master's kv.fetch routing).
func TestPMIxDirectModex(t *testing.T) {
	prog := pmixProgram(t, "fence_client")
	d := startDVM(t, 2, 2)
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "dmodex"}, N: 4, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
	if end.Code != 0 {
		t.Fatalf("job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, rep.Job))
	}
	var want []string
	for r := range 4 {
		want = append(want, fmt.Sprintf("rank %d of 4 (2 local): got 4 values", r))
	}
	checkLines(t, "", lines(d, rep.Job), want)
}

// TestPMIxPsets: a PMIx client (testdata/pmix/psets.c) on 2 virtual nodes
// queries the number, names and members of its job's process sets
// (answered from the daemon's copy of dynrt's sets) and reads the sets
// each process belongs to.
func TestPMIxPsets(t *testing.T) {
	prog := pmixProgram(t, "psets")
	d := startDVM(t, 2, 2)
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: 3, PMI: wire.PMIPMIx})
	if end.Code != 0 {
		t.Fatalf("job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, rep.Job))
	}
	app := "mpi://app/" + rep.App
	want := []string{
		"num_psets=2",
		"pset " + app + " members=job:0,job:1,job:2",
		"pset mpi://WORLD members=job:0,job:1,job:2",
		"pset_names=mpi://WORLD," + app,
	}
	for r := range 3 {
		want = append(want, fmt.Sprintf("psets rank=%d size=3", r), fmt.Sprintf("rank %d done", r), fmt.Sprintf("rank %d in psets: mpi://WORLD,%s", r, app))
	}
	slices.Sort(want)
	checkLines(t, "", lines(d, rep.Job), want)
}

// TestPMIxSocketsNotInherited: while PMIx clients are connected to a
// daemon, a process it starts holds none of the server's sockets
// (libpmix accepts its clients with accept(2); lib/pmix/cloexec.c makes
// that an atomic accept4 with SOCK_CLOEXEC). Fails without cloexec.c;
// lib/pmix's TestFenceRemote checks the flag itself.
func TestPMIxSocketsNotInherited(t *testing.T) {
	prog := pmixProgram(t, "psets")
	d := startDVM(t, 1, 8)
	clients, err := d.launch(wire.JobLaunchReq{Argv: []string{prog, "3"}, N: 4, PMI: wire.PMIPMIx})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(clients.Job, 4) // connected
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{"/bin/sh", "-c", "ls -l /proc/$$/fd"}, N: 1, PMI: wire.PMINone})
	if end.Code != 0 {
		t.Fatalf("ls ended %d: %s", end.Code, end.Msg)
	}
	for _, l := range lines(d, rep.Job) {
		if strings.Contains(l, "socket:") {
			t.Errorf("inherited: %s", l)
		}
	}
	if end := d.wait(clients.Job); end.Code != 0 {
		t.Errorf("clients ended %d: %s", end.Code, end.Msg)
	}
}

// TestPMIxUnfinished: a PMIx process that exits 0 without PMIx_Finalize
// fails its job, as a PMI process does (and as under mpirun).
func TestPMIxUnfinished(t *testing.T) {
	prog := pmixProgram(t, "fence_client")
	d := startDVM(t, 2, 2)
	_, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "nofinalize"}, N: 3, PMI: wire.PMIPMIx})
	if end.Code != 1 || end.State != wire.JobStateFailed || !strings.Contains(end.Msg, "rank 1 on") || !strings.Contains(end.Msg, "without finalizing PMIx") {
		t.Errorf("end = %d %s: %s", end.Code, end.State, end.Msg)
	}
}

// TestPMIxScratchAfterDaemonKill: the scratch directory of a PMIx job
// (/dev/shm/dynrt.<node>.<job>) goes when the daemon of its node is killed
// with SIGKILL, which leaves it no chance to remove it: the daemon's guard
// process, which kills the daemon's processes, then removes it. Without
// that, each kill -9 of a daemon left one per PMIx job in /dev/shm. The
// other node's directory goes with the failed job, as always.
func TestPMIxScratchAfterDaemonKill(t *testing.T) {
	prog := pmixProgram(t, "psets")
	d := startDVM(t, 2, 2)
	rep, err := d.launch(wire.JobLaunchReq{Argv: []string{prog, "60"}, N: 4, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, 4) // every rank has connected and printed its sets
	dirs := []string{"/dev/shm/dynrt.node0." + rep.Job, "/dev/shm/dynrt.node1." + rep.Job}
	t.Cleanup(func() { // a failure leaves nothing either
		for _, dir := range dirs {
			_ = os.RemoveAll(dir)
		}
	})
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the job's scratch directory: %v", err)
		}
	}
	st, err := d.c.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.Nodes[1].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if end := d.wait(rep.Job); end.State != wire.JobStateFailed || !strings.Contains(end.Msg, "node1 was lost") {
		t.Errorf("job ended %s %d: %s", end.State, end.Code, end.Msg)
	}
	for _, dir := range dirs {
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err = os.Stat(dir); err != nil {
				break
			}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there 10 s after the job ended", dir)
		}
	}
}

// TestPMIxPsetsPerJob: three PMIx jobs share node0's daemon (one PMIx
// server); two of them query their process sets while all three are
// registered, and each gets its own job's sets, as it would alone.
// libpmix hands the daemon those queries in the server's own name, so
// without lib/pmix/requestor.c, which finds the asking client, they were
// refused (PMIX_ERR_NOT_SUPPORTED: "num_psets: NOT-SUPPORTED").
func TestPMIxPsetsPerJob(t *testing.T) {
	prog := pmixProgram(t, "psets")
	d := startDVM(t, 1, 8)
	holder, err := d.launch(wire.JobLaunchReq{Argv: []string{prog, "60"}, N: 1, Name: "holder", PMI: wire.PMIPMIx})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(holder.Job, 5) // its queries answered: registered with the server
	type result struct {
		rep wire.JobLaunchReply
		end wire.JobInfo
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, n := range []uint32{2, 3} {
		wg.Go(func() {
			rep, err := d.launch(wire.JobLaunchReq{Argv: []string{prog}, N: n, Name: fmt.Sprintf("job%d", i), PMI: wire.PMIPMIx})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = result{rep, d.wait(rep.Job)}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.rep.Job == "" {
			continue
		}
		if r.end.Code != 0 {
			t.Errorf("job%d ended %d: %s", i, r.end.Code, r.end.Msg)
		}
		n := i + 2
		app := "mpi://app/" + r.rep.App
		members := "job:0,job:1"
		if n == 3 {
			members += ",job:2"
		}
		want := []string{
			"num_psets=2",
			"pset " + app + " members=" + members,
			"pset mpi://WORLD members=" + members,
			"pset_names=mpi://WORLD," + app,
		}
		for r := range n {
			want = append(want, fmt.Sprintf("psets rank=%d size=%d", r, n), fmt.Sprintf("rank %d done", r), fmt.Sprintf("rank %d in psets: mpi://WORLD,%s", r, app))
		}
		slices.Sort(want)
		checkLines(t, fmt.Sprintf("job%d: ", i), lines(d, r.rep.Job), want)
	}
	d.kill(holder.Job)
}
