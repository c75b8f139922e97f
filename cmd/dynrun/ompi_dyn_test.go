//go:build pmix

package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dynrt/dynrt/internal/ompiref"
)

// Dynamic processes of Open MPI programs under the daemons' PMIx server:
// MPI_Comm_spawn (the PMIx spawn callback, placed and launched by the
// master as a PMI spawn) and MPI_Comm_connect/accept between two jobs
// (PMIx_Connect as a collective through the master, the other jobs'
// namespaces and modex data brought to every daemon of the connect).
// Output and exit status are compared with mpirun.openmpi's, recorded in
// testdata/openmpi (scripts/openmpi-ref.sh), which hangs now and then in
// MPI_Comm_spawn.

// readOMPIRef reads testdata/openmpi/<name>.golden (internal/ompiref).
func readOMPIRef(t *testing.T, name string) []ompiref.Job {
	t.Helper()
	jobs, err := ompiref.Read(filepath.Join("..", "..", "testdata", "openmpi"), name)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// compileOMPI builds testdata/mpi/<name>.c with Open MPI into dir, or
// skips the test without Open MPI.
func compileOMPI(t *testing.T, dir, name string) string {
	t.Helper()
	cc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		t.Skip("Open MPI is not installed (no mpicc.openmpi): install openmpi-bin and libopenmpi-dev (make deps-openmpi)")
	}
	out := filepath.Join(dir, name)
	if msg, err := exec.Command(cc, "-O1", "-o", out, filepath.Join("..", "..", "testdata", "mpi", name+".c")).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, name, err, msg)
	}
	return out
}

// compilePMIx builds testdata/pmix/<name>.c, a plain PMIx client, or
// skips the test without libpmix-dev.
func compilePMIx(t *testing.T, name string) string {
	t.Helper()
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		t.Skip("no libpmix-dev (pkg-config pmix): make deps-openmpi")
	}
	prog := filepath.Join(t.TempDir(), name)
	cc := append([]string{"-O1", "-Wall", "-Wextra", "-o", prog, filepath.Join("..", "..", "testdata", "pmix", name+".c")}, strings.Fields(string(flags))...)
	if msg, err := exec.Command("cc", cc...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s.c: %v\n%s", name, err, msg)
	}
	return prog
}

// checkNoScratch: the PMIx jobs of DVM id left no scratch directory
// (/dev/shm/dynrt.<node>.<job>, where Open MPI keeps its session files).
func checkNoScratch(t *testing.T, id string) {
	t.Helper()
	if left, _ := filepath.Glob("/dev/shm/dynrt.*." + id + ".*"); len(left) > 0 {
		t.Errorf("left in /dev/shm: %v", left)
	}
}

// TestOMPISpawn: an Open MPI parent spawns 1, 2 and 4 copies of itself
// (by base name, found in its working directory as mpirun.openmpi finds
// it), which send their ranks back over the intercommunicator and
// disconnect; or a child calls MPI_Abort(7) while the parent waits for
// it; or it spawns a program that does not exist. On a private DVM with fewer slots than processes (the spawn
// oversubscribes) and on a warm DVM of 4 virtual nodes of one slot (the
// children on other nodes than their parent: the connect brings their
// namespace and modex data to the parent's daemon, and the disconnect
// fences both jobs across nodes), dynrun's exit status and output are
// mpirun.openmpi's (for the missing program, the spawn fails and the
// parent sees it); the abort ends the whole spawn tree with code 7; no
// process or file is left.
func TestOMPISpawn(t *testing.T) {
	dir := t.TempDir()
	compileOMPI(t, dir, "spawn_tree")
	dynDir(t)
	warm := startDVM(t, "--nodes", "4", "--slots", "1")
	for _, tc := range []struct {
		ref, n, mode string
		own          *ompiref.Job // dynrt's behaviour where it differs from mpirun.openmpi's
	}{
		{"spawn-1", "1", "ok", nil},
		{"spawn-2", "2", "ok", nil},
		{"spawn-4", "4", "ok", nil},
		{"spawn-abort", "2", "abort", nil},
		// mpirun.openmpi ends the job (exit 132); dynrun fails the
		// spawn, which the program (MPI_ERRORS_RETURN) sees, as MPICH's
		// programs do under dynrun.
		{"spawn-missing", "2", "missing", &ompiref.Job{Exit: 0, Lines: []string{"spawn of a missing program: error, 2 of 2 error codes set"}}},
	} {
		ref := readOMPIRef(t, tc.ref)[0]
		if tc.own != nil {
			ref = *tc.own
		}
		for _, dvm := range []struct{ name, sel string }{{"private", ""}, {"warm 4 nodes", warm}} {
			t.Run(tc.ref+"/"+dvm.name, func(t *testing.T) {
				args := []string{bin, "-n", "1"}
				if dvm.sel != "" {
					args = append(args, "--dvm", dvm.sel)
				} else {
					args = append(args, "--slots", "2")
				}
				code, out, errOut := runLauncherIn(t, dir, nil, append(args, "./spawn_tree", tc.n, tc.mode)...)
				if code != ref.Exit {
					t.Fatalf("dynrun exited %d, mpirun.openmpi %d:\n%s%s", code, ref.Exit, out, errOut)
				}
				got := programLines(out)
				if tc.mode == "abort" {
					// Which children print before the abort kills them
					// varies, under mpirun.openmpi too.
					for _, l := range got {
						if !slices.Contains(ref.Lines, l) {
							t.Errorf("line %q, not among mpirun.openmpi's %q", l, ref.Lines)
						}
					}
					if !strings.Contains(errOut, "MPI_ABORT was invoked on rank 0") {
						t.Errorf("no MPI_ABORT message on stderr:\n%s", errOut)
					}
				} else if !slices.Equal(got, ref.Lines) {
					t.Errorf("output\n%s\nmpirun.openmpi's\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(ref.Lines, "\n"), errOut)
				}
			})
		}
	}
	checkNoScratch(t, warm)
}

// TestOMPISpawnThroughScript: an Open MPI program started by a shell script
// (--pmi auto offers a script both services) spawns as it does when
// started directly: its children get the services the master chose for
// the parent.
func TestOMPISpawnThroughScript(t *testing.T) {
	dir := t.TempDir()
	compileOMPI(t, dir, "spawn_tree")
	dynDir(t)
	ref := readOMPIRef(t, "spawn-2")[0]
	code, out, errOut := runLauncherIn(t, dir, nil, bin, "-n", "1", "--slots", "2", "sh", "-c", "exec ./spawn_tree 2 ok")
	if got := programLines(out); code != ref.Exit || !slices.Equal(got, ref.Lines) {
		t.Errorf("exit %d, output\n%s\nmpirun.openmpi's (exit %d)\n%s\nstderr:\n%s", code, strings.Join(got, "\n"), ref.Exit, strings.Join(ref.Lines, "\n"), errOut)
	}
}

// TestOMPIConnectAccept: two Open MPI jobs of one DVM meet through
// MPI_Comm_accept/MPI_Comm_connect (the port published on the DVM's name
// service), exchange messages, merge and allreduce, then disconnect; on 1
// node and across 4 virtual nodes, with 2+2 and 1+3 processes, both jobs
// print what they print under mpirun.openmpi (with an ompi-server) and
// exit 0, leaving nothing behind.
func TestOMPIConnectAccept(t *testing.T) {
	dir := t.TempDir()
	prog := compileOMPI(t, dir, "connacc")
	dynDir(t)
	for _, nodes := range []string{"1", "4"} {
		id := startDVM(t, "--nodes", nodes, "--slots", "2")
		for _, ref := range []string{"connacc-2-2", "connacc-1-3"} {
			t.Run(ref+"/"+nodes+" nodes", func(t *testing.T) {
				jobs := readOMPIRef(t, ref)
				if len(jobs) != 2 {
					t.Fatalf("%s: %d jobs, want 2", ref, len(jobs))
				}
				name := "svc-" + nodes + "-" + ref // the reference's lines name "svc"
				var wg sync.WaitGroup
				codes, outs, errs := make([]int, 2), make([]string, 2), make([]string, 2)
				for i, j := range jobs {
					f := strings.Fields(j.Cmd) // mpirun.openmpi -n N ./connacc ROLE svc
					if len(f) != 6 {
						t.Fatalf("%s: command %q", ref, j.Cmd)
					}
					wg.Go(func() {
						codes[i], outs[i], errs[i] = runLauncherIn(t, dir, nil, bin, "--dvm", id, "--oversubscribe", "--map-by", "node", "-n", f[2], prog, f[4], name)
					})
				}
				wg.Wait()
				for i, j := range jobs {
					want := make([]string, len(j.Lines))
					for k, l := range j.Lines {
						want[k] = strings.ReplaceAll(l, " svc", " "+name)
					}
					if got := programLines(outs[i]); codes[i] != j.Exit || !slices.Equal(got, want) {
						t.Errorf("%s: exit %d, output\n%s\nmpirun.openmpi: exit %d,\n%s\nstderr:\n%s", j.Cmd, codes[i], strings.Join(got, "\n"), j.Exit, strings.Join(want, "\n"), errs[i])
					}
				}
			})
		}
		checkNoScratch(t, id)
	}
}

// TestOMPISpawnMultiple: MPI_Comm_spawn_multiple of two commands (1 and 2
// processes) makes one job whose children read MPI_APPNUM 0 and 1 and their
// own arguments, as under mpirun.openmpi (the same lines); with the info
// key host per command on a warm DVM of 4 virtual nodes, each command's
// processes run on the node it names.
func TestOMPISpawnMultiple(t *testing.T) {
	dir := t.TempDir()
	compileOMPI(t, dir, "spawn_multi")
	dynDir(t)
	warm := startDVM(t, "--nodes", "4", "--slots", "1")
	base := []string{"child 0 of 3: appnum 0, argument a", "child 1 of 3: appnum 1, argument b", "child 2 of 3: appnum 1, argument b", "parent: 3 children, appnums 0 1 1"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"private, no info", []string{"--slots", "2", "./spawn_multi"}, base},
		{"4 nodes, no info", []string{"--dvm", warm, "./spawn_multi"}, base},
		{"4 nodes, host per command", []string{"--dvm", warm, "./spawn_multi", "node2", "node3"},
			append([]string{"child 0 on node2", "child 1 on node3", "child 2 on node3"}, base...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runLauncherIn(t, dir, nil, append([]string{bin, "-n", "1"}, tc.args...)...)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := programLines(out); code != 0 || !slices.Equal(got, want) {
				t.Errorf("exit %d, output\n%s\nwant exit 0 and\n%s\nstderr:\n%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"), errOut)
			}
		})
	}
	checkNoScratch(t, warm)
}

// TestPMIxSpawnParent: a plain PMIx client's PMIx_Spawn (rank 1 of 2 spawns
// 2 or 3 processes) starts a job in a new namespace whose processes read
// PMIX_SPAWNED true and PMIX_PARENT_ID naming the spawning process (its
// namespace and rank 1), on 1 node and on 4 virtual nodes.
func TestPMIxSpawnParent(t *testing.T) {
	prog := compilePMIx(t, "spawn_client")
	dynDir(t)
	for _, tc := range []struct{ nodes, n string }{{"1", "2"}, {"4", "3"}} {
		t.Run(tc.nodes+" nodes", func(t *testing.T) {
			code, out, errOut := runLauncherIn(t, "", nil, bin, "--pmi", "pmix", "--nodes", tc.nodes, "--slots", "2", "-n", "2", prog, tc.n, "1")
			want := []string{"parent: spawned " + tc.n + " processes in a new namespace: yes"}
			for r := range tc.n[0] - '0' {
				want = append(want, fmt.Sprintf("child %d: spawned yes, parent right", r))
			}
			slices.Sort(want)
			if got := programLines(out); code != 0 || !slices.Equal(got, want) {
				t.Errorf("exit %d, output\n%s\nwant exit 0 and\n%s\nstderr:\n%s", code, strings.Join(got, "\n"), strings.Join(want, "\n"), errOut)
			}
		})
	}
}

// TestPMIxSharesTopology: each daemon's PMIx server shares the node's
// topology with its clients, as mpirun.openmpi does (Open MPI processes
// then adopt it instead of each discovering the node again, PCI devices
// included): every rank of a job over 2 virtual nodes reads a topology
// file of its own node's server, in a directory per daemon (the virtual
// nodes of a host share the DVM's socket directory, and the file's name
// is fixed), and nothing is left once the DVM has stopped (dynDir).
func TestPMIxSharesTopology(t *testing.T) {
	prog := compilePMIx(t, "topology")
	dir := dynDir(t)
	code, out, errOut := runLauncherIn(t, "", nil, bin, "--pmi", "pmix", "--nodes", "2", "--slots", "2", "-n", "4", "--map-by", "node", prog)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	lines := programLines(out)
	if len(lines) != 4 {
		t.Fatalf("output %q, want 4 lines", lines)
	}
	for _, l := range lines {
		var rank int
		var path, state string
		if _, err := fmt.Sscanf(l, "rank %d topology %s %s", &rank, &path, &state); err != nil {
			t.Errorf("%q: %v", l, err)
			continue
		}
		want := fmt.Sprintf("/pmix.node%d/hwloc.sm", rank%2) // --map-by node: rank r on node r mod 2
		if !strings.HasPrefix(path, dir+"/") || !strings.HasSuffix(path, want) || state != "exists" {
			t.Errorf("rank %d: topology %s %s; want an existing file ...%s under %s", rank, path, state, want, dir)
		}
	}
}
