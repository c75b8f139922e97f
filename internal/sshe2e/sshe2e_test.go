// Package sshe2e holds the end-to-end tests of dynrt across hosts started
// by ssh: three network-namespace hosts (internal/nshosts), each with its
// own hostname, address, sshd and rendezvous directory, the filesystem
// shared. The master runs on h0 and reaches h1 and h2 through the ssh
// launcher, as a user on a cluster would.
package sshe2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/gobuild"
	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/internal/nshosts"
)

// prefix starts the names of this package's clusters.
const prefix = "dyn-sshe2e"

// progs is the directory of the programs the tests run, built once by
// TestMain: <progs>/bin/{dynrun,dynrc,testapp,commapp}. It is laid out as
// an install prefix (mpirun's --prefix).
var progs string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// Nothing to build when the tests will skip anyway.
	if nshosts.Unsupported(true) != "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "dynrt-sshe2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	progs = dir
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	build := exec.Command("go", gobuild.Args("-o", filepath.Join(dir, "bin")+"/",
		"./cmd/dynrun", "./cmd/dynrc", "./internal/testapp", "./lib/comm/internal/commapp")...)
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the programs:", err)
		return 1
	}
	return m.Run()
}

// repoRoot is the module root (go test runs in the package directory).
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// hosts is a test's cluster with the programs on every host's PATH.
type hosts struct {
	t    *testing.T
	c    *nshosts.Cluster
	bin  string // <progs>/bin
	mark string // DYNRT_TEST_MARK of what the test starts on h0
	dir  string // working directory of the commands ("": the test's)
}

// Heartbeat of the test DVMs (not the defaults, to see that the setting
// is what counts): short enough that a cut link is found quickly, with
// misses enough that a loaded machine does not lose a node.
const (
	heartbeat = 600 * time.Millisecond
	misses    = 5
)

func startHosts(t *testing.T) *hosts {
	t.Helper()
	if why := nshosts.Unsupported(true); why != "" {
		t.Skip(why)
	}
	bin := filepath.Join(progs, "bin")
	// The hosts' ssh sessions get sshd's fixed PATH, without dynrun: the
	// tests reach it with --prefix, as on a cluster where dynrt is
	// installed in the same directory everywhere.
	c := nshosts.Start(t, nshosts.Config{Prefix: prefix, K: 3, SSH: true})
	return &hosts{t: t, c: c, bin: bin, mark: leakcheck.NewMark(t)}
}

// cmd returns argv to run on host, as a user there whose PATH finds the
// programs, marked for leak checks.
func (h *hosts) cmd(ctx context.Context, host string, argv ...string) *exec.Cmd {
	cmd := h.c.Command(ctx, host, argv...)
	cmd.Env = append(cmd.Env, leakcheck.EnvMark+"="+h.mark, "PATH="+h.bin+":/usr/local/bin:/usr/bin:/bin")
	cmd.Dir = h.dir
	return cmd
}

// agent is the ssh command of the launcher: the cluster's client config.
func (h *hosts) agent() string { return "ssh -F " + h.c.SSHConfig() }

// run runs argv on host and returns its stdout, stderr and exit code.
func (h *hosts) run(host string, argv ...string) (string, string, int) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := h.cmd(ctx, host, argv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		h.t.Fatalf("%v: %v", argv, err)
	}
	return out.String(), errb.String(), code
}

// ok runs argv on host and fails the test unless it exits 0.
func (h *hosts) ok(host string, argv ...string) string {
	h.t.Helper()
	out, errs, code := h.run(host, argv...)
	if code != 0 {
		h.t.Fatalf("on %s: %s: exit %d\nstdout:\n%s\nstderr:\n%s", host, strings.Join(argv, " "), code, out, errs)
	}
	return out
}

// bg is a command running in the background; its output is collected.
type bg struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []string
	errb bytes.Buffer
	done chan struct{}
	code int
}

func (h *hosts) start(host string, argv ...string) *bg {
	h.t.Helper()
	b := &bg{done: make(chan struct{})}
	b.cmd = h.cmd(context.Background(), host, argv...)
	b.cmd.Stderr = &lockedWriter{mu: &b.mu, w: &b.errb}
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			b.mu.Lock()
			b.out = append(b.out, s.Text())
			b.mu.Unlock()
		}
		err := b.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			b.code = ee.ExitCode()
		} else if err != nil {
			b.code = -1
		}
		close(b.done)
	}()
	h.t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-b.done:
			case <-time.After(10 * time.Second):
				_ = b.cmd.Process.Kill()
				<-b.done
			}
		}
	})
	return b
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *bg) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.out)
}

func (b *bg) stderr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.errb.String()
}

// wait waits (bounded) for the command to end and returns its exit code.
func (b *bg) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-b.done:
		return b.code
	case <-time.After(limit):
		t.Fatalf("%v still runs after %s; stdout %q, stderr %q", b.cmd.Args, limit, b.lines(), b.stderr())
		return 0
	}
}

// waitLines waits (bounded) until ok holds for the output so far.
func (b *bg) waitLines(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if ok(b.lines()) {
			return
		}
		select {
		case <-b.done:
			if ok(b.lines()) {
				return
			}
			t.Fatalf("waiting for %s: %v exited %d; stdout %q, stderr %q", what, b.cmd.Args, b.code, b.lines(), b.stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: stdout so far %q, stderr %q", what, b.lines(), b.stderr())
		}
	}
}

// withWord returns the lines starting with word.
func withWord(ls []string, word string) []string {
	var out []string
	for _, l := range ls {
		if strings.HasPrefix(l, word+" ") || l == word {
			out = append(out, l)
		}
	}
	return out
}

// status is what `dynrun dvm status --json` prints (the fields used here).
type status struct {
	ID    string `json:"id"`
	Nodes []struct {
		Name  string `json:"name"`
		Host  string `json:"host"`
		Slots int    `json:"slots"`
		PID   int    `json:"pid"`
		State string `json:"state"`
	} `json:"nodes"`
	Jobs []struct {
		Job       string `json:"job"`
		App       string `json:"app"`
		State     string `json:"state"`
		Placement []struct {
			Node  string `json:"node"`
			Ranks string `json:"ranks"`
		} `json:"placement"`
	} `json:"jobs"`
	Tree *struct {
		Radix   int `json:"radix"`
		Relays  int `json:"relays"`
		Resends int `json:"resends"`
	} `json:"tree"`
}

func (h *hosts) status(dvm string) status {
	h.t.Helper()
	var st status
	out := h.ok("h0", "dynrun", "dvm", "status", "--dvm", dvm, "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		h.t.Fatalf("dvm status --json: %v\n%s", err, out)
	}
	return st
}

func (st status) node(name string) (state string, pid int) {
	for _, n := range st.Nodes {
		if n.Name == name {
			return n.State, n.PID
		}
	}
	return "", 0
}

// startDVM starts a DVM on h0 over the three hosts with the ssh launcher
// and returns its id. The test's cleanup stops it if the test did not.
func (h *hosts) startDVM(slots int, extra ...string) string {
	h.t.Helper()
	hostList := fmt.Sprintf("h0:%d,h1:%d,h2:%d", slots, slots, slots)
	args := append([]string{"dynrun", "dvm", "start", "--launcher", "ssh", "--host", hostList,
		"--launch-agent", h.agent(), "--prefix", progs,
		"--bind", h.c.Host("h0").Addr.String() + ":0", "--daemonize",
		"--heartbeat", heartbeat.String(), "--heartbeat-misses", strconv.Itoa(misses)}, extra...)
	out := strings.TrimSpace(h.ok("h0", args...))
	id := strings.Fields(out)
	if len(id) != 1 {
		h.t.Fatalf("dvm start printed %q, want the DVM id", out)
	}
	h.t.Cleanup(func() { h.run("h0", "dynrun", "dvm", "stop", "--dvm", id[0]) })
	return id[0]
}

// assertNothingLeft checks every host: no process but its sshd, no file in
// its rendezvous directory; and nothing marked left on this machine.
func (h *hosts) assertNothingLeft() {
	h.t.Helper()
	for _, host := range h.c.Hosts() {
		var left, files []string
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var err error
			if left, err = h.c.Leftovers(context.Background(), host.Name); err != nil {
				h.t.Fatal(err)
			}
			files = leakcheck.FilesBelow(host.Dir)
			if len(left) == 0 && len(files) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) > 0 {
			h.t.Errorf("processes left on %s: %q", host.Name, left)
		}
		if len(files) > 0 {
			h.t.Errorf("left in %s's rendezvous directory %s: %q", host.Name, host.Dir, files)
		}
	}
	if procs := leakcheck.MarkedProcs(h.mark); len(procs) > 0 {
		h.t.Errorf("marked processes left: %v", procs)
	}
}

// sortedWords returns the sorted words of out.
func sortedWords(out string) string {
	w := strings.Fields(out)
	slices.Sort(w)
	return strings.Join(w, " ")
}
