package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Fault notification with --keep-going / -disable-auto-cleanup
// (docs/mpi.md "Failures"): real MPICH programs (testdata/mpi/ft_*.c)
// under dynrun and, for comparison, under the same build's
// mpiexec.hydra.

// mpichBuild is an MPICH installation the tests compile and run with.
type mpichBuild struct {
	name  string
	mpicc string
	hydra string // its mpiexec.hydra ("" = none)
}

// ch3Builds returns the cached MPICH builds for the ch3 device
// (scripts/mpich-suite.sh): PMI-1 in $DYNRT_MPICH_CH3 (default
// ~/.cache/dynrt/ch3-pmi1) and PMI-2 next to it in ch3-pmi2.
func ch3Builds(t *testing.T) []mpichBuild {
	t.Helper()
	pmi1 := os.Getenv("DYNRT_MPICH_CH3")
	if pmi1 == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no MPICH ch3 build: no cache directory (%v); set DYNRT_MPICH_CH3", err)
		}
		pmi1 = filepath.Join(cache, "dynrt", "ch3-pmi1")
	}
	var out []mpichBuild
	for _, p := range []string{pmi1, filepath.Join(filepath.Dir(pmi1), "ch3-pmi2")} {
		cc := filepath.Join(p, "bin", "mpicc")
		if _, err := os.Stat(cc); err == nil {
			out = append(out, mpichBuild{name: filepath.Base(p), mpicc: cc, hydra: filepath.Join(p, "bin", "mpiexec.hydra")})
		}
	}
	if len(out) == 0 {
		t.Skipf("no MPICH ch3 build in %s (scripts/mpich-suite.sh builds it; or set DYNRT_MPICH_CH3)", pmi1)
	}
	return out
}

// compileMPI compiles testdata/mpi/<name>.c with b into a temporary
// directory.
func compileMPI(t *testing.T, b mpichBuild, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(b.mpicc, "-O1", "-o", out, filepath.Join("..", "..", "testdata", "mpi", name+".c"))
	cmd.Env = withoutEnv(os.Environ(), "LD_LIBRARY_PATH") // ch3 builds use their rpath
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", b.mpicc, name, err, msg)
	}
	return out
}

func withoutEnv(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// runLauncher runs a launcher (the dynrun binary or an mpiexec) with
// stdin from /dev/null, extra environment and a time limit, as MPICH's
// test harness does.
func runLauncher(t *testing.T, env []string, argv ...string) (int, string, string) {
	t.Helper()
	return runLauncherIn(t, "", env, argv...)
}

// runLauncherIn is runLauncher in the working directory dir ("" = the
// test's): where mpiexec.hydra's spawned processes start, whatever -wdir
// says.
func runLauncherIn(t *testing.T, dir string, env []string, argv ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), "LD_LIBRARY_PATH"), env...)
	cmd.WaitDelay = 5 * time.Second
	code, out, errOut := runCmd(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("%q did not end within 60 s\nstdout:\n%s\nstderr:\n%s", argv, out, errOut)
	}
	return code, out, errOut
}

func sortedLines(s string) string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(l)
	return strings.Join(l, "\n")
}

// dvmPlacements are the DVMs the fault tests run on: a private one, and a
// warm DVM of 4 virtual nodes with the ranks spread over them.
func dvmPlacements(t *testing.T, n string) map[string][]string {
	t.Helper()
	dynDir(t)
	id := startDVM(t, "--nodes", "4", "--slots", "2")
	return map[string][]string{
		"private": {"--slots", n},
		"warm":    {"--dvm", id, "--map-by", "node"},
	}
}

// TestDisableAutoCleanupSignal: with -disable-auto-cleanup, a rank that
// exits without MPI_Finalize does not end the job; every other rank, on
// every node, gets SIGUSR1 (MPICH's handler calls the program's), and
// dynrun prints exactly what mpiexec.hydra prints and exits with its
// status: the dead rank's, also 0. A rank killed by a signal is reported
// in both modes (Hydra prints a banner of its own then). With --keep-going the same happens, and dynrun reports the
// failed rank. Debian's MPICH (ch4:ucx), so this runs everywhere.
func TestDisableAutoCleanupSignal(t *testing.T) {
	cc, err := exec.LookPath("mpicc.mpich")
	if err != nil {
		t.Skip("no mpicc.mpich (apt-get install mpich libmpich-dev)")
	}
	b := mpichBuild{name: "debian", mpicc: cc}
	if h, err := exec.LookPath("mpiexec.hydra"); err == nil {
		b.hydra = h
	}
	prog := compileMPI(t, b, "ft_signal")
	want := "ft_signal rank=0 sigusr1=yes\nft_signal rank=2 sigusr1=yes\nft_signal rank=3 sigusr1=yes"
	placements := dvmPlacements(t, "4")
	for _, tc := range []struct {
		arg    string // rank 1's exit status, or minus the signal that kills it
		code   int    // dynrun's exit status
		report string // the end of dynrun's report on stderr ("": none)
		quiet  bool   // no report with -disable-auto-cleanup either (as Hydra)
	}{
		{"3", 3, "exited with code 3\n", true},
		{"0", 0, "", true},
		{"-9", 137, "killed by signal 9 (killed)\n", false}, // Hydra prints its own banner then
	} {
		if b.hydra != "" && tc.quiet {
			got, out, errOut := runLauncher(t, nil, b.hydra, "-disable-auto-cleanup", "-n", "4", prog, tc.arg)
			if got != tc.code || sortedLines(out) != want || errOut != "" {
				t.Fatalf("under Hydra: exit %d, stdout\n%s\nstderr\n%s\nthe test expects exit %d and\n%s", got, out, errOut, tc.code, want)
			}
		}
		for where, args := range placements {
			for _, flag := range []string{"-disable-auto-cleanup", "--keep-going"} {
				got, out, errOut := runLauncher(t, nil, append(append([]string{bin}, args...), flag, "-n", "4", prog, tc.arg)...)
				if got != tc.code || sortedLines(out) != want {
					t.Errorf("%s %s %s: exit %d, stdout\n%s\nwant exit %d and\n%s", where, flag, tc.arg, got, out, tc.code, want)
				}
				wantErr := tc.report
				if flag == "-disable-auto-cleanup" && tc.quiet {
					wantErr = ""
				}
				if !strings.HasSuffix(errOut, wantErr) || (wantErr == "") != (errOut == "") {
					t.Errorf("%s %s %s: stderr %q, want %q", where, flag, tc.arg, errOut, wantErr)
				}
			}
		}
	}
}

// TestDisableAutoCleanupCh3: MPICH's fault tolerance with the ch3 device
// (MPIR_CVAR_ENABLE_FT=1), which reads PMI_dead_processes on SIGUSR1: a
// receive from the rank that died fails with MPIX_ERR_PROC_FAILED on
// every other rank instead of waiting for ever, and the output and exit
// status are Hydra's ("No Errors" and 1, the dead rank's status), on a
// private DVM and across the 4 nodes of a warm DVM. PMI-1 and PMI-2 builds
// (MPICH 4.0.2's ch3 asks PMI-2's kvs-get, which Hydra answers "not
// found": there only dynrun gets this right, so Hydra is compared with
// PMI-1 only).
func TestDisableAutoCleanupCh3(t *testing.T) {
	builds := ch3Builds(t)
	placements := dvmPlacements(t, "4")
	env := []string{"MPIR_CVAR_ENABLE_FT=1"}
	const want = " No Errors\n"
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			prog := compileMPI(t, b, "ft_recv")
			if b.name == "ch3-pmi1" {
				code, out, errOut := runLauncher(t, env, b.hydra, "-disable-auto-cleanup", "-n", "4", prog)
				if code != 1 || out+errOut != want {
					t.Fatalf("under Hydra: exit %d, output %q; the test expects exit 1 and %q", code, out+errOut, want)
				}
			}
			for where, args := range placements {
				code, out, errOut := runLauncher(t, env, append(append([]string{bin}, args...), "-disable-auto-cleanup", "-n", "4", prog)...)
				if code != 1 || out != want || errOut != "" {
					t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, %q and nothing else", where, code, out, errOut, want)
				}
			}
		})
	}
}
