//go:build pmix

package main

import (
	"strings"
	"testing"
)

// TestAutoWithPMIx: on a dynrun built with PMIx, --pmi auto (the default)
// gives an Open MPI program PMIx, so that it runs as one job of N ranks
// instead of N singletons, also when started by a wrapper such as env;
// MPICH programs still get PMI_FD; a script or an interpreter, which may
// start either MPI, gets both (before, a script starting an Open MPI
// program ran N singletons).
func TestAutoWithPMIx(t *testing.T) {
	tmp := t.TempDir()
	compile := helloBuilder(tmp)
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"Open MPI", func(t *testing.T) []string { return []string{compile(t, "mpicc.openmpi")} }},
		{"MPICH", func(t *testing.T) []string { return []string{compile(t, "mpicc.mpich")} }},
		{"Open MPI under env", func(t *testing.T) []string {
			return []string{"env", "OMP_NUM_THREADS=1", compile(t, "mpicc.openmpi")}
		}},
		{"Open MPI through a script, --pmi pmix", func(t *testing.T) []string {
			return []string{"--pmi", "pmix", "sh", "-c", "exec " + compile(t, "mpicc.openmpi")}
		}},
		{"Open MPI through a script", func(t *testing.T) []string {
			return []string{"sh", "-c", "exec " + compile(t, "mpicc.openmpi")}
		}},
		{"MPICH through a script", func(t *testing.T) []string {
			return []string{"sh", "-c", "exec " + compile(t, "mpicc.mpich")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args(t)
			dynDir(t)
			code, out, errOut := run(append([]string{"-n", "2", "--slots", "2"}, args...)...)
			lines := strings.Split(sortedLines(out), "\n")
			if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "hello rank=0 size=2 ") || !strings.HasPrefix(lines[1], "hello rank=1 size=2 ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and ranks 0 and 1 of a world of 2", code, out, errOut)
			}
		})
	}
}
