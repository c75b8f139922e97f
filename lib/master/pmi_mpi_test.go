package master

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// Unmodified MPI programs (testdata/mpi, built with Debian's MPICH
// compiler wrapper) under a DVM of virtual nodes. `make test` installs
// the mpich and libmpich-dev packages first (make deps-mpi).

// mpiCC finds MPICH's compiler wrapper: mpicc.mpich, or mpicc when it is
// MPICH's (on Debian, mpicc may point to Open MPI).
func mpiCC() (string, error) {
	if p, err := exec.LookPath("mpicc.mpich"); err == nil {
		return p, nil
	}
	p, err := exec.LookPath("mpicc")
	if err != nil {
		return "", fmt.Errorf("no mpicc.mpich or mpicc in PATH")
	}
	out, err := exec.Command(p, "-show").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mpich") {
		return "", fmt.Errorf("%s is not MPICH's compiler wrapper (%s)", p, strings.TrimSpace(string(out)))
	}
	return p, nil
}

// progBuild is a set of test programs compiled once per test binary.
type progBuild struct {
	once sync.Once
	dir  string
	err  error
}

// mpiBuild holds testdata/mpi built with MPICH, ompiBuild with Open MPI,
// pmixBuild testdata/pmix (pmix_mpi_test.go).
var mpiBuild, ompiBuild, pmixBuild progBuild

// mpiProgram returns the path of a testdata/mpi program, compiling them
// once per test binary into a temporary directory that TestMain removes
// (removeMPIBuild); it skips the test when MPICH is missing.
func mpiProgram(t *testing.T, name string) string {
	t.Helper()
	mpiBuild.once.Do(func() {
		cc, err := mpiCC()
		if err != nil {
			mpiBuild.err = err
			return
		}
		mpiBuild.dir, mpiBuild.err = buildProgs(cc, "../../testdata/mpi/*.c")
	})
	if mpiBuild.err != nil {
		if _, err := mpiCC(); err != nil {
			t.Skipf("MPICH is not installed (%v): run `make deps-mpi` (Debian packages mpich, libmpich-dev)", err)
		}
		t.Fatalf("building the MPI test programs: %v", mpiBuild.err)
	}
	return filepath.Join(mpiBuild.dir, name)
}

// buildProgs compiles every source matching glob with the compiler
// command cc (its first word the program, then flags) into a new
// temporary directory.
func buildProgs(cc, glob string, extra ...string) (string, error) {
	srcs, _ := filepath.Glob(glob)
	if len(srcs) == 0 {
		return "", fmt.Errorf("no sources %s", glob)
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "dynrt-mpi-build-")
	if err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(srcs))
	for i, src := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := filepath.Join(tmp, strings.TrimSuffix(filepath.Base(src), ".c"))
			if b, err := exec.Command(cc, append([]string{"-O1", "-o", out, src}, extra...)...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%s %s: %v\n%s", cc, src, err, b)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return tmp, nil
}

// lines returns a job's stdout lines, sorted.
func lines(d *testDVM, job string) []string {
	var out []string
	for _, l := range d.output(job) {
		if l.Stream != wire.StreamStderr {
			out = append(out, string(l.Line))
		}
	}
	slices.Sort(out)
	return out
}

func stderrOf(d *testDVM, job string) string {
	var b strings.Builder
	for _, l := range d.output(job) {
		if l.Stream == wire.StreamStderr {
			b.Write(l.Line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestMPIHello: rank, size, appnum and MPI_UNIVERSE_SIZE (unset as under
// Hydra, the DVM's slots with --usize SYSTEM, or a number) for 1 to 16
// ranks on 1 and 4 virtual nodes.
func TestMPIHello(t *testing.T) {
	prog := mpiProgram(t, "hello_mpi")
	for _, tc := range []struct {
		nodes, slots, n int
		usize           int32
		universe        int
	}{{1, 4, 1, 0, -1}, {1, 4, 4, wire.UniverseSlots, 4}, {4, 4, 16, 40, 40}} {
		t.Run(fmt.Sprintf("%dx%d/n=%d", tc.nodes, tc.slots, tc.n), func(t *testing.T) {
			d := startDVM(t, tc.nodes, tc.slots)
			rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog, strconv.Itoa(tc.n)}, N: uint32(tc.n), Universe: tc.usize})
			if end.Code != 0 {
				t.Fatalf("job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, rep.Job))
			}
			checkLines(t, "", lines(d, rep.Job), helloWant(tc.n, tc.universe))
		})
	}
}

// helloWant is the sorted output of hello_mpi for n ranks.
func helloWant(n, universe int) []string {
	var want []string
	for r := range n {
		want = append(want, fmt.Sprintf("hello rank=%d size=%d appnum=0 universe=%d", r, n, universe))
	}
	slices.Sort(want)
	return want
}

// checkLines compares a job's sorted output with want.
func checkLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%soutput\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMPIAllreduce: collectives and point-to-point across virtual nodes,
// in PMI_FD and PMI_PORT mode.
func TestMPIAllreduce(t *testing.T) {
	prog := mpiProgram(t, "allreduce")
	d := startDVM(t, 4, 2)
	for _, mode := range []string{wire.PMIAuto, wire.PMIPort} {
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: 8, MapBy: wire.MapByNode, PMI: mode})
		if end.Code != 0 {
			t.Fatalf("%s: job ended %d: %s\n%s", mode, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		checkAllreduce(t, mode, lines(d, rep.Job))
	}
}

// checkAllreduce checks the output of allreduce on 8 ranks.
func checkAllreduce(t *testing.T, what string, got []string) {
	t.Helper()
	if len(got) != 8 {
		t.Fatalf("%s: output %q", what, got)
	}
	for _, l := range got {
		if !strings.HasSuffix(l, " sum=28 token="+tokenOf(l)+" ok") {
			t.Errorf("%s: %q", what, l)
		}
	}
}

var rankRE = regexp.MustCompile(`rank=(\d+)`)

// tokenOf is the token rank r must have received: r-1 around the ring.
func tokenOf(line string) string {
	m := rankRE.FindStringSubmatch(line)
	if m == nil {
		return "?"
	}
	r, _ := strconv.Atoi(m[1])
	return strconv.Itoa((r + 7) % 8)
}

// TestMPISplitType: MPI_Comm_split_type(SHARED) groups exactly the ranks
// placed on the same virtual node, for block and round-robin placements.
func TestMPISplitType(t *testing.T) {
	prog := mpiProgram(t, "split")
	d := startDVM(t, 4, 3)
	for _, tc := range []struct {
		mapBy string
		n     uint32
	}{{wire.MapBySlot, 7}, {wire.MapByNode, 10}} {
		rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: tc.n, MapBy: tc.mapBy})
		if end.Code != 0 {
			t.Fatalf("%s: job ended %d: %s\n%s", tc.mapBy, end.Code, end.Msg, stderrOf(d, rep.Job))
		}
		checkLines(t, fmt.Sprintf("%s (placement %v): ", tc.mapBy, rep.Placement), lines(d, rep.Job), splitWant(rep.Placement, tc.n))
	}
}

// splitWant is the sorted output of split for n ranks placed so: every
// rank's group is the ranks of its node.
func splitWant(placement []wire.Placement, n uint32) []string {
	var want []string
	for r := range n {
		for _, p := range placement {
			if !p.Ranks.Contains(r) {
				continue
			}
			var members []string
			for m := range p.Ranks.All() {
				members = append(members, strconv.FormatUint(uint64(m), 10))
			}
			idx := slices.Index(members, strconv.FormatUint(uint64(r), 10))
			want = append(want, fmt.Sprintf("split rank=%d local=%d/%d members=%s", r, idx, len(members), strings.Join(members, ",")))
		}
	}
	slices.Sort(want)
	return want
}

// TestMPIAbort: MPI_Abort(MPI_COMM_WORLD, 7) ends the job with code 7.
func TestMPIAbort(t *testing.T) {
	prog := mpiProgram(t, "abort")
	d := startDVM(t, 2, 2)
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog, "7"}, N: 4})
	checkAbort(t, "", end, lines(d, rep.Job))
}

// checkAbort checks the end and output of abort 7.
func checkAbort(t *testing.T, what string, end wire.JobInfo, got []string) {
	t.Helper()
	if end.Code != 7 || end.State != wire.JobStateKilled || !strings.Contains(end.Msg, "rank 0 called abort") {
		t.Errorf("%send = %d %s: %s", what, end.Code, end.State, end.Msg)
	}
	if !slices.Contains(got, "abort rank=0 code=7") {
		t.Errorf("%soutput %q", what, got)
	}
}

// TestMPIPublishLookup: MPI_Publish_name in one job, MPI_Lookup_name in
// another (the DVM-wide name service), duplicates and unknown names
// refused.
func TestMPIPublishLookup(t *testing.T) {
	prog := mpiProgram(t, "pubsub")
	d := startDVM(t, 2, 4)
	srv, err := d.launch(wire.JobLaunchReq{Argv: []string{prog, "server", "svc-" + d.mark}, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	cli, cend := d.run(wire.JobLaunchReq{Argv: []string{prog, "client", "svc-" + d.mark}, N: 2})
	send := d.wait(srv.Job)
	if send.Code != 0 || cend.Code != 0 {
		t.Fatalf("server %d (%s), client %d (%s)\n%s%s", send.Code, send.Msg, cend.Code, cend.Msg, stderrOf(d, srv.Job), stderrOf(d, cli.Job))
	}
	if got := lines(d, cli.Job); !slices.Contains(got, "pubsub client found svc-"+d.mark+"=port-of-svc-"+d.mark) {
		t.Errorf("client output %q", got)
	}
	if got := lines(d, srv.Job); !slices.Contains(got, "pubsub server got svc-"+d.mark+"-ack=thanks") ||
		!slices.Contains(got, "pubsub server second publish of svc-"+d.mark+" refused") {
		t.Errorf("server output %q", got)
	}
}

// TestMPISession: MPI_Session_init lists mpi://WORLD and mpi://SELF and
// builds a communicator of the whole job from mpi://WORLD.
func TestMPISession(t *testing.T) {
	prog := mpiProgram(t, "session")
	d := startDVM(t, 2, 2)
	rep, end := d.run(wire.JobLaunchReq{Argv: []string{prog}, N: 4})
	if end.Code != 0 {
		t.Fatalf("job ended %d: %s\n%s", end.Code, end.Msg, stderrOf(d, rep.Job))
	}
	got := lines(d, rep.Job)
	if len(got) != 4 {
		t.Fatalf("output %q", got)
	}
	for r, l := range got {
		if want := fmt.Sprintf("session rank=%d size=4 psets=2 world=1 self=1", r); l != want {
			t.Errorf("%q, want %q", l, want)
		}
	}
}

// removeMPIBuild deletes the compiled MPI programs; TestMain calls it after
// the tests so nothing is left in the temporary directory.
func removeMPIBuild() {
	for _, b := range []*progBuild{&mpiBuild, &ompiBuild, &pmixBuild} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
}
