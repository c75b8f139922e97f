package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// helloBuilder returns a function that compiles testdata/mpi/hello_mpi.c
// with the MPI compiler wrapper cc into dir, once per cc, and skips the
// test when cc is missing (TestAutoWithPMIx, TestAutoWithoutPMIx).
func helloBuilder(dir string) func(t *testing.T, cc string) string {
	return func(t *testing.T, cc string) string {
		t.Helper()
		if _, err := exec.LookPath(cc); err != nil {
			t.Skipf("no %s (make deps-mpi deps-openmpi)", cc)
		}
		out := filepath.Join(dir, "hello-"+cc)
		if _, err := os.Stat(out); err == nil {
			return out
		}
		if msg, err := exec.Command(cc, "-O1", "-o", out, "../../testdata/mpi/hello_mpi.c").CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cc, err, msg)
		}
		return out
	}
}
