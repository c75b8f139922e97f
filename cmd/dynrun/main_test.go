package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/gobuild"
	"github.com/dynrt/dynrt/internal/leakcheck"
)

// Environment of the test binary and everything it starts.
const (
	// envAsMain makes the test binary behave as dynrun (daemons that an
	// in-process master forks re-execute the test binary).
	envAsMain = "DYNRUN_TEST_AS_MAIN"
)

// bin is dynrun built once for the tests that need a real binary (signals,
// --daemonize).
var bin string

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		os.Exit(Main(context.Background(), os.Args, os.Stdout, os.Stderr))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "dynrun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	bin = filepath.Join(tmp, "dynrun")
	build := exec.Command("go", gobuild.Args("-o", bin, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dynrun:", err)
		return 1
	}
	os.Setenv(envAsMain, "1")
	os.Setenv(leakcheck.EnvMark, testMark)
	return m.Run()
}

// dynDir makes a private rendezvous directory, points $DYNRT_DIR at it
// (for in-process runs) and checks after the test that nothing is left:
// no file in it and no process the test started.
func dynDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DYNRT_DIR", dir)
	t.Cleanup(func() { assertClean(t, dir) })
	return dir
}

// testMark tags every process the tests start, directly or not (jobs get
// dynrun's environment, leakcheck.EnvMark included), so that leftovers can
// be found in /proc.
var testMark = "dynrun-" + strconv.Itoa(os.Getpid())

// assertClean waits (bounded) until dir is empty and no marked process is
// alive, then fails the test if that did not happen.
func assertClean(t *testing.T, dir string) {
	t.Helper()
	leakcheck.WaitClean(t, dir, testMark, 5*time.Second)
}

// countMarked counts marked processes whose program is prog.
func countMarked(prog string) int { return leakcheck.CountProg(testMark, prog) }

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run calls Main in this process.
func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"dynrun"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// runBin runs the built binary and waits for it.
func runBin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCmd(t, exec.Command(bin, args...))
}

// runCmd runs cmd and returns its exit status, stdout and stderr; it
// fails the test if cmd could not run at all.
func runCmd(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("%q: %v", cmd.Args, err)
	return 0, "", ""
}

// startDVM starts a daemonized DVM with the built binary and stops it at
// the end of the test (if the test did not).
func startDVM(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runBin(t, append([]string{"dvm", "start", "--daemonize"}, args...)...)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("dvm start: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(os.Getenv("DYNRT_DIR"), id+".json")); err == nil {
			runBin(t, "dvm", "stop", "--dvm", id)
		}
	})
	return id
}
