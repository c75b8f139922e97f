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
	"syscall"
	"testing"
	"time"
)

// Environment of the test binary and everything it starts.
const (
	// envAsMain makes the test binary behave as dynrun (daemons that an
	// in-process master forks re-execute the test binary).
	envAsMain = "DYNRUN_TEST_AS_MAIN"
	// envMark tags every process the tests start, directly or not (jobs get
	// dynrun's environment), so that leftovers can be found in /proc.
	envMark = "DYNRUN_TEST_MARK"
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
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dynrun:", err)
		return 1
	}
	os.Setenv(envAsMain, "1")
	os.Setenv(envMark, strconv.Itoa(os.Getpid()))
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

// assertClean waits (bounded) until dir is empty and no marked process is
// alive, then fails the test if that did not happen.
func assertClean(t *testing.T, dir string) {
	t.Helper()
	var files []string
	var procs []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		files = listFiles(dir)
		procs = markedProcs()
		if len(files) == 0 && len(procs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(files) > 0 {
		t.Errorf("files left in %s: %q", dir, files)
	}
	if len(procs) > 0 {
		t.Errorf("processes left running: %q", procs)
		for _, p := range procs {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			_ = syscall.Kill(pid, syscall.SIGKILL) // do not poison the next test
		}
	}
}

func listFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}

// markedProcs lists "pid cmdline" of live processes (not zombies) other
// than this one that carry this test run's mark in their environment.
func markedProcs() []string {
	mark := []byte(envMark + "=" + strconv.Itoa(os.Getpid()) + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && (st[i+2] == 'Z' || st[i+2] == 'X') {
				continue
			}
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '})))
	}
	return out
}

// countMarked counts marked processes whose command line starts with prog.
func countMarked(prog string) int {
	n := 0
	for _, p := range markedProcs() {
		if f := strings.Fields(p); len(f) > 1 && filepath.Base(f[1]) == prog {
			n++
		}
	}
	return n
}

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
	cmd := exec.Command(bin, args...)
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
	t.Fatalf("dynrun %q: %v", args, err)
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
