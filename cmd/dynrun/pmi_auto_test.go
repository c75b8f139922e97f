//go:build !pmix

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAutoWithoutPMIx: on a dynrun built without PMIx, --pmi auto (the
// default) refuses a program that links Open MPI with the fix, instead of
// starting N singletons that each say "rank 0 of 1" and exit 0; MPICH
// programs, directly or through a script, still get PMI_FD.
func TestAutoWithoutPMIx(t *testing.T) {
	tmp := t.TempDir()
	compile := helloBuilder(tmp)
	both := "hello rank=0 size=2 appnum=0 universe=-1\nhello rank=1 size=2 appnum=0 universe=-1"
	for _, tc := range []struct {
		name    string
		args    func(t *testing.T) []string
		code    int
		out     string   // sorted stdout
		errPart []string // in stderr
	}{
		{"Open MPI refused", func(t *testing.T) []string { return []string{compile(t, "mpicc.openmpi")} }, 1, "",
			[]string{"links libmpi.so.40 (Open MPI), which speaks PMIx only", "built without PMIx support", "go build -tags pmix"}},
		{"Open MPI under env refused", func(t *testing.T) []string {
			return []string{"env", "OMP_NUM_THREADS=1", compile(t, "mpicc.openmpi")}
		}, 1, "", []string{"/env runs " + filepath.Join(tmp, "hello-mpicc.openmpi") + ", which links libmpi.so.40 (Open MPI), which speaks PMIx only"}},
		// The program is found relative to --wdir, not dynrun's directory.
		{"Open MPI relative to --wdir refused", func(t *testing.T) []string {
			compile(t, "mpicc.openmpi")
			return []string{"--wdir", tmp, "./hello-mpicc.openmpi"}
		}, 1, "", []string{"./hello-mpicc.openmpi links libmpi.so.40 (Open MPI), which speaks PMIx only"}},
		{"Open MPI with --pmi pmix refused", func(t *testing.T) []string {
			return []string{"--pmi", "pmix", compile(t, "mpicc.openmpi")}
		}, 1, "", []string{"--pmi pmix: the daemon of node node0 was built without PMIx support"}},
		{"Open MPI with --pmi none: singletons", func(t *testing.T) []string {
			return []string{"--pmi", "none", compile(t, "mpicc.openmpi")}
		}, 0, "hello rank=0 size=1 appnum=0 universe=1\nhello rank=0 size=1 appnum=0 universe=1",
			[]string{"dynrun: warning: " + filepath.Join(tmp, "hello-mpicc.openmpi") + " links libmpi.so.40 (Open MPI), which speaks PMIx only: with --pmi none"}},
		{"MPICH", func(t *testing.T) []string { return []string{compile(t, "mpicc.mpich")} }, 0, both, nil},
		{"MPICH through a script", func(t *testing.T) []string {
			return []string{"sh", "-c", "exec " + compile(t, "mpicc.mpich")}
		}, 0, both, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args(t)
			dynDir(t)
			code, out, errOut := run(append([]string{"-n", "2", "--slots", "2"}, args...)...)
			if code != tc.code || sortedLines(out) != tc.out {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and stdout %q", code, out, errOut, tc.code, tc.out)
			}
			for _, s := range tc.errPart {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr %q lacks %q", errOut, s)
				}
			}
		})
	}
}
