//go:build pmix

package master

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// TestOpenMPIRCRefused: once a process of a PMIx job has connected to its
// daemon's PMIx server, resource changes of the job are refused with the
// message that names Open MPI/PMIx and what to do (testdata/pmix/psets.c,
// a PMIx client that waits, stands in for an Open MPI program).
func TestOpenMPIRCRefused(t *testing.T) {
	if _, err := exec.LookPath("pkg-config"); err != nil {
		t.Skip("no pkg-config (make deps-openmpi)")
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		t.Skip("libpmix-dev is missing (make deps-openmpi)")
	}
	psets := filepath.Join(t.TempDir(), "psets")
	args := append([]string{"-std=c11", "-O1", "-o", psets, "../../testdata/pmix/psets.c"}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc psets.c: %v\n%s", err, out)
	}
	d := startDVM(t, 1, 4)
	rep, err := d.launch(wire.JobLaunchReq{Argv: []string{psets, "30"}, N: 2, PMI: wire.PMIPMIx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.kill(rep.Job) })
	// Used once a client connected: the daemon reports it to the master.
	var static error
	for deadline := time.Now().Add(20 * time.Second); static == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s never became static; output %v", rep.Job, d.output(rep.Job))
		}
		_ = do(context.Background(), d.m, func(s *state) error { static = s.jobs[rep.Job].staticErr(); return nil })
	}
	_, err = d.rc(wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 1})
	if !errors.Is(err, wire.ErrState) {
		t.Fatalf("ADD on an Open MPI job: %v, want ErrState", err)
	}
	for _, s := range openMPIRefusal[1:] {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("ADD refused with %q, which lacks %q", err, s)
		}
	}
}
