package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/gobuild"
	"github.com/dynrt/dynrt/internal/leakcheck"
)

// End-to-end tests: a real DVM started with the dynrun binary, jobs
// launched by it, and dynrc run in this process against them. TestMain
// builds dynrun and the malleable test program once.

// testMark tags every process the tests start, directly or not (DVM,
// daemons, jobs inherit it through leakcheck.EnvMark), so that leftovers
// can be found in /proc.
var testMark = "dynrc-" + strconv.Itoa(os.Getpid())

var (
	binDir       string // where the binaries go (made by TestMain)
	buildOnce    sync.Once
	dynrunBin    string // built dynrun
	malleableBin string // built internal/malleable ("" when it does not build)
	buildErr     error  // why dynrun is missing
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	if binDir, err = os.MkdirTemp("", "dynrc-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(binDir)
	os.Setenv(leakcheck.EnvMark, testMark)
	return m.Run()
}

// build builds dynrun and the malleable test program, once, when the
// first test needs them.
func build() {
	buildOnce.Do(func() {
		dynrunBin = filepath.Join(binDir, "dynrun")
		if out, err := exec.Command("go", gobuild.Args("-o", dynrunBin, "github.com/dynrt/dynrt/cmd/dynrun")...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building dynrun: %v\n%s", err, out)
		}
		malleableBin = filepath.Join(binDir, "malleable")
		if out, err := exec.Command("go", "build", "-o", malleableBin, "github.com/dynrt/dynrt/internal/malleable").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "dynrc tests: no malleable test program (%v):\n%s", err, out)
			malleableBin = ""
		}
	})
}

// testDVM is a DVM for one test, stopped and checked for leftovers in the
// test's cleanup.
type testDVM struct {
	t   testing.TB
	id  string
	dir string
}

// startDVM starts a daemonized DVM of k virtual nodes with s slots each,
// in a rendezvous directory of the test's own ($DYNRT_DIR for the test).
func startDVM(t testing.TB, k, s int) *testDVM {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a DVM")
	}
	build()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DYNRT_DIR", dir)
	t.Setenv("DYNRT_DVM", "")
	d := &testDVM{t: t, dir: dir}
	t.Cleanup(func() { assertClean(t, dir) })
	out, err := exec.Command(dynrunBin, "dvm", "start", "--daemonize", "--nodes", strconv.Itoa(k), "--slots", strconv.Itoa(s)).Output()
	if err != nil {
		t.Fatalf("dvm start: %v", err)
	}
	d.id = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command(dynrunBin, "dvm", "stop", "--dvm", d.id).CombinedOutput(); err != nil {
			t.Errorf("dvm stop: %v\n%s", err, out)
		}
	})
	return d
}

// launch starts `dynrun -n n --name app argv...` in the background; the
// job is killed (through its launcher) at the end of the test. It returns
// once the job runs with n processes.
func (d *testDVM) launch(app string, n int, argv ...string) *bytes.Buffer {
	d.t.Helper()
	cmd := exec.Command(dynrunBin, append([]string{"--dvm", d.id, "-n", strconv.Itoa(n), "--name", app}, argv...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	d.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			d.t.Errorf("dynrun of job %s did not end on SIGTERM", app)
		}
	})
	d.waitSize(app, n)
	return &out
}

// jobStatus is the part of `dynrun dvm status --json` these tests read.
type jobStatus struct {
	Job   string `json:"job"`
	App   string `json:"app"`
	State string `json:"state"`
	Size  int    `json:"size"`
}

func (d *testDVM) job(app string) (jobStatus, bool) {
	d.t.Helper()
	out, err := exec.Command(dynrunBin, "dvm", "status", "--dvm", d.id, "--json").Output()
	if err != nil {
		d.t.Fatalf("dvm status: %v", err)
	}
	var st struct {
		Jobs []jobStatus `json:"jobs"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		d.t.Fatal(err)
	}
	for _, j := range st.Jobs {
		if j.App == app {
			return j, true
		}
	}
	return jobStatus{}, false
}

// waitSize waits until job app runs with n live processes.
func (d *testDVM) waitSize(app string, n int) {
	d.t.Helper()
	var j jobStatus
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var ok bool
		if j, ok = d.job(app); ok && j.State == "running" && j.Size == n {
			return
		}
	}
	d.t.Fatalf("job %s: %+v, want %d running processes", app, j, n)
}

// dynrc runs dynrc in this process against the test's DVM.
func (d *testDVM) dynrc(args ...string) (int, string, string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, append([]string{"dynrc", "--dvm", d.id}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// must runs dynrc and fails the test unless it exits with code.
func (d *testDVM) must(code int, args ...string) string {
	d.t.Helper()
	got, out, errOut := d.dynrc(args...)
	if got != code {
		d.t.Fatalf("dynrc %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
	}
	return out + errOut
}

// show returns the JSON record of a change.
func (d *testDVM) show(delta string) rcJSON {
	d.t.Helper()
	var doc rcJSON
	if err := json.Unmarshal([]byte(d.must(0, "show", delta, "--json")), &doc); err != nil {
		d.t.Fatal(err)
	}
	return doc
}

// assertClean waits (bounded) until the rendezvous directory is empty and
// no process this test run started is alive, then fails the test if that
// did not happen (and kills the leftovers, so the next test is not
// poisoned).
func assertClean(t testing.TB, dir string) {
	t.Helper()
	leakcheck.WaitClean(t, dir, testMark, 10*time.Second)
}

// countProcs counts live marked processes whose program is prog.
func countProcs(prog string) int { return leakcheck.CountProg(testMark, prog) }
