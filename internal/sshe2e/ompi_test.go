//go:build pmix

package sshe2e

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

// TestOMPIAcrossHosts runs Open MPI programs (testdata/mpi built with
// Debian's mpicc.openmpi) on a DVM over the three hosts started by the ssh
// launcher, each daemon serving PMIx to the ranks of its host: a hello
// whose ranks report their MPI processor name, an allreduce and a ring,
// MPI_Comm_split_type(SHARED) grouping the ranks of each host, an
// MPI_Abort, an MPI_Comm_spawn whose children answer over the
// intercommunicator, and MPI_Comm_connect/accept between two jobs through
// the DVM's name service. Ranks are mapped by node, so every step crosses
// hosts. What dynrun prints and how it exits is what mpirun.openmpi does:
// run here across the same hosts for the hello, the allreduce and the
// split, the recorded references (testdata/openmpi) for the rest. Open MPI needs no
// setting for this under either launcher: it takes the ranks of other
// hosts for remote (PMIx says which ranks are local) and reaches them with
// its tcp BTL over the hosts' eth0. After `dvm stop` nothing is left on
// any host, nor any PMIx scratch directory in /dev/shm.
func TestOMPIAcrossHosts(t *testing.T) {
	cc, err := exec.LookPath("mpicc.openmpi")
	if err != nil {
		t.Skip("Open MPI is not installed (no mpicc.openmpi): install openmpi-bin and libopenmpi-dev (make deps-openmpi)")
	}
	h := startHosts(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The hosts share the filesystem: the programs are built once, and the
	// commands run in their directory (spawn_tree spawns ./spawn_tree).
	h.dir = t.TempDir()
	for _, p := range []string{"hello_mpi", "allreduce", "split", "abort", "spawn_tree", "connacc"} {
		if out, err := exec.Command(cc, "-O1", "-o", filepath.Join(h.dir, p), filepath.Join(root, "testdata", "mpi", p+".c")).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", cc, p, err, out)
		}
	}
	refs := filepath.Join(root, "testdata", "openmpi")
	dvm := h.startDVM(2)
	dynrun := []string{"dynrun", "--dvm", dvm, "--timeout", "60s"}
	mpirun := []string{"mpirun.openmpi", "--allow-run-as-root", "--mca", "plm_rsh_agent", h.agent(), "--host", "h0:2,h1:2,h2:2"}

	// ranks lists what each of n ranks mapped by node over h0 h1 h2
	// prints, sorted.
	ranks := func(n int, line func(r int, host string) string) []string {
		var want []string
		for r := range n {
			want = append(want, line(r, fmt.Sprintf("h%d", r%3)))
		}
		slices.Sort(want)
		return want
	}
	steps := []struct {
		name, prog string
		args       []string
		want       []string
	}{
		{"hello", "hello_mpi", []string{"6", "host"}, ranks(6, func(r int, host string) string {
			return fmt.Sprintf("hello rank=%d size=6 appnum=0 universe=6 host=%s", r, host)
		})},
		{"allreduce", "allreduce", nil, ranks(6, func(r int, _ string) string {
			return fmt.Sprintf("allreduce rank=%d sum=15 token=%d ok", r, (r+5)%6)
		})},
		// MPI_Comm_split_type(SHARED): one communicator per host.
		{"split_type", "split", nil, ranks(6, func(r int, _ string) string {
			return fmt.Sprintf("split rank=%d local=%d/2 members=%d,%d", r, r/3, r%3, r%3+3)
		})},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h := h.on(t)
			argv := append([]string{"-n", "6", "--map-by", "node", "./" + s.prog}, s.args...)
			out, errs, code := h.run("h0", append(dynrun, argv...)...)
			if got := programLines(out); code != 0 || !slices.Equal(got, s.want) {
				t.Errorf("dynrun: exit %d, output\n%s\nwant exit 0 and\n%s\nstderr:\n%s", code, strings.Join(got, "\n"), strings.Join(s.want, "\n"), errs)
			}
			if _, err := exec.LookPath("mpirun.openmpi"); err != nil {
				t.Skip("no mpirun.openmpi to compare with (Debian package openmpi-bin)")
			}
			out, errs, code = h.run("h0", append(mpirun, argv...)...)
			if got := programLines(out); code != 0 || !slices.Equal(got, s.want) {
				t.Errorf("mpirun.openmpi: exit %d, output\n%s\nwant exit 0 and\n%s\nstderr:\n%s", code, strings.Join(got, "\n"), strings.Join(s.want, "\n"), errs)
			}
		})
	}

	t.Run("abort", func(t *testing.T) {
		h := h.on(t)
		ref := readRef(t, refs, "abort-4")[0]
		out, errs, code := h.run("h0", append(dynrun, "-n", "3", "--map-by", "node", "./abort", "7")...)
		if got := programLines(out); code != ref.Exit || !slices.Equal(got, ref.Lines) {
			t.Errorf("exit %d, output %q; mpirun.openmpi: exit %d, %q\nstderr:\n%s", code, got, ref.Exit, ref.Lines, errs)
		}
		if !strings.Contains(errs, "MPI_ABORT was invoked on rank 0") {
			t.Errorf("no MPI_ABORT message on stderr:\n%s", errs)
		}
	})

	// One parent on h0 spawns four children, which send their ranks back;
	// mapped by node as their parent is, they run on all three hosts.
	t.Run("spawn", func(t *testing.T) {
		h := h.on(t)
		ref := readRef(t, refs, "spawn-4")[0]
		out, errs, code := h.run("h0", append(dynrun, "-n", "1", "--map-by", "node", "./spawn_tree", "4", "ok")...)
		if got := programLines(out); code != ref.Exit || !slices.Equal(got, ref.Lines) {
			t.Errorf("exit %d, output\n%s\nmpirun.openmpi: exit %d,\n%s\nstderr:\n%s", code, strings.Join(got, "\n"), ref.Exit, strings.Join(ref.Lines, "\n"), errs)
		}
	})

	t.Run("connect/accept", func(t *testing.T) {
		h := h.on(t)
		jobs := readRef(t, refs, "connacc-2-2") // server, then client: mpirun.openmpi -n 2 ./connacc ROLE svc
		var wg sync.WaitGroup
		outs, errs, codes := make([]string, 2), make([]string, 2), make([]int, 2)
		for i, j := range jobs {
			f := strings.Fields(j.Cmd)
			if len(f) != 6 {
				t.Fatalf("connacc-2-2: command %q", j.Cmd)
			}
			wg.Go(func() {
				outs[i], errs[i], codes[i] = h.run("h0", append(dynrun, "-n", f[2], "--map-by", "node", f[3], f[4], f[5])...)
			})
		}
		wg.Wait()
		for i, j := range jobs {
			if got := programLines(outs[i]); codes[i] != j.Exit || !slices.Equal(got, j.Lines) {
				t.Errorf("%s: exit %d, output\n%s\nmpirun.openmpi: exit %d,\n%s\nstderr:\n%s", j.Cmd, codes[i], strings.Join(got, "\n"), j.Exit, strings.Join(j.Lines, "\n"), errs[i])
			}
		}
	})

	t.Run("dvm stop leaves nothing", func(t *testing.T) {
		h := h.on(t)
		h.ok("h0", "dynrun", "dvm", "stop", "--dvm", dvm)
		h.assertNothingLeft()
		if left, _ := filepath.Glob("/dev/shm/dynrt.*." + dvm + ".*"); len(left) > 0 {
			t.Errorf("PMIx scratch directories left: %v", left)
		}
	})
}

func readRef(t *testing.T, dir, name string) []ompiref.Job {
	t.Helper()
	jobs, err := ompiref.Read(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// programLines are the lines the MPI processes printed (not dynrun's
// own), sorted: ranks print in any order.
func programLines(out string) []string {
	var l []string
	for s := range strings.Lines(out) {
		s = strings.TrimRight(s, "\n")
		if s != "" && !strings.HasPrefix(s, "dynrun:") {
			l = append(l, s)
		}
	}
	slices.Sort(l)
	return l
}
