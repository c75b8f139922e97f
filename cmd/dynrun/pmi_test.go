package main

import (
	"strings"
	"testing"
)

// spawnScript is a PMI-1 client in sh: on PMI_FD (3) it sends init, one
// mcmd=spawn of two `sh -c CHILD` processes (the lines MPICH's
// PMI_Spawn_multiple writes), then finalize, printing the spawn reply.
func spawnScript(child string) string {
	return `printf 'cmd=init pmi_version=1 pmi_subversion=1\n' >&3; read -r l <&3
printf 'mcmd=spawn\nnprocs=2\nexecname=/bin/sh\ntotspawns=1\nspawnssofar=1\narg1=-c\narg2=%s\nargcnt=2\npreput_num=0\ninfo_num=0\nendcmd\n' '` + child + `' >&3
read -r l <&3; echo "parent: $l"
printf 'cmd=finalize\n' >&3; read -r l <&3`
}

// A job spawned through PMI outlives the job that spawned it: dynrun (on a
// private DVM, which it would tear down) waits for it, forwards its output
// and takes its failure into its exit status, as mpiexec does.
func TestPMISpawnedJobLifetime(t *testing.T) {
	tests := []struct {
		name, child string
		code        int
		errPart     string
	}{
		{"outlives parent", `sleep 0.3; echo child-$PMI_RANK-$PMI_SPAWNED`, 0, ""},
		{"fails after parent", `sleep 0.2; exit 3`, 3, "(spawned by job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dynDir(t)
			code, out, errOut := run("-n", "1", "--slots", "3", "sh", "-c", spawnScript(tt.child))
			if code != tt.code || !strings.Contains(errOut, tt.errPart) || tt.code != 0 && !strings.Contains(errOut, "exited with code 3") {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, tt.code, tt.errPart)
			}
			if !strings.Contains(out, "parent: cmd=spawn_result rc=0\n") {
				t.Errorf("stdout %q: no successful spawn reply", out)
			}
			if tt.code == 0 && (!strings.Contains(out, "child-0-1\n") || !strings.Contains(out, "child-1-1\n")) {
				t.Errorf("stdout %q: the spawned processes' output is missing", out)
			}
		})
	}
}
