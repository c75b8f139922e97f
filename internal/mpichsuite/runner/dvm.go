package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/internal/mpichsuite"
)

// WarmDVM is a DVM of mpichsuite.WarmNodes virtual nodes started once for
// the dynrun-warm runner, with a private DYNRT_DIR.
type WarmDVM struct {
	ID     string
	dynrun string
	env    []string       // the environment the DVM and its clients use
	mark   string         // leakcheck's mark of the DVM's master and daemons
	procs  map[int]bool   // master and daemons
	names  map[int]string // their command lines at the start (Lost)
	dir    string
	exe    string // dynrun, resolved as /proc shows it
	config string // what it was started with, for the report

	parent  string // StartWarm's arguments, for restart
	slots   int
	baseEnv []string
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// StartWarm starts the warm DVM with slots slots per node, its DYNRT_DIR
// a fresh directory under parent. env is the environment of the build.
func StartWarm(ctx context.Context, dynrun, parent string, slots int, env []string) (*WarmDVM, error) {
	dir, err := os.MkdirTemp(parent, "dvm-")
	if err != nil {
		return nil, err
	}
	w := &WarmDVM{dynrun: dynrun, dir: dir, mark: randomHex(8), parent: parent, slots: slots, baseEnv: env}
	w.env = append(env, "DYNRT_DIR="+dir)
	w.config = fmt.Sprintf("%d nodes × %d slots", mpichsuite.WarmNodes, slots)
	cmd := exec.CommandContext(ctx, dynrun, "dvm", "start", "--nodes", strconv.Itoa(mpichsuite.WarmNodes),
		"--slots", strconv.Itoa(slots), "--daemonize")
	cmd.Env = append(w.env, leakcheck.EnvMark+"="+w.mark)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.kill()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start the warm DVM (%s): %w: %s", w.config, err, strings.TrimSpace(stderr.String()))
	}
	w.ID = strings.TrimSpace(string(out))
	if w.exe, err = filepath.EvalSymlinks(dynrun); err == nil {
		w.exe, err = filepath.Abs(w.exe)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", dynrun, err)
	}
	w.procs = map[int]bool{}
	for _, p := range leakcheck.MarkedProcs(w.mark) {
		w.procs[p] = true
	}
	if len(w.procs) == 0 {
		return nil, fmt.Errorf("warm DVM %s started but none of its processes can be found", w.ID)
	}
	w.names = cmdlines(w.procs)
	return w, nil
}

// Lost describes the processes of the DVM that no longer run.
func (w *WarmDVM) Lost() []string { return lost(w.procs, w.names) }

// Alive reports whether every process of the DVM still runs.
func (w *WarmDVM) Alive() bool { return allAlive(w.procs) }

// cmdlines reads the command line of every process of procs, so that a
// lost one can be named after it is gone.
func cmdlines(procs map[int]bool) map[int]string {
	out := make(map[int]string, len(procs))
	for p := range procs {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		out[p] = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

// lost describes the processes of procs that no longer run: "pid 123
// (dynrun daemon ...)", in pid order.
func lost(procs map[int]bool, names map[int]string) []string {
	var out []string
	for _, p := range slices.Sorted(maps.Keys(procs)) {
		if !leakcheck.Alive(p) {
			out = append(out, fmt.Sprintf("pid %d (%s)", p, names[p]))
		}
	}
	return out
}

// allAlive reports whether every process of procs still runs.
func allAlive(procs map[int]bool) bool {
	for p := range procs {
		if !leakcheck.Alive(p) {
			return false
		}
	}
	return true
}

// Stop stops the DVM with `dynrun dvm stop` and reports what it left
// running (then killed) or failed to do.
func (w *WarmDVM) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.dynrun, "dvm", "stop", "--dvm", w.ID)
	cmd.Env = w.env
	out, err := cmd.CombinedOutput()
	var errs []string
	if err != nil {
		errs = append(errs, fmt.Sprintf("dynrun dvm stop --dvm %s: %v: %s", w.ID, err, strings.TrimSpace(string(out))))
	}
	deadline := time.Now().Add(Grace)
	for len(leakcheck.MarkedProcs(w.mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := w.kill(); len(left) > 0 {
		errs = append(errs, "the warm DVM left running: "+strings.Join(left, "; "))
	}
	_ = os.RemoveAll(w.dir)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// kill kills every process carrying the DVM's mark and describes them.
func (w *WarmDVM) kill() []string {
	var desc []string
	for _, p := range leakcheck.MarkedProcs(w.mark) {
		desc = append(desc, describe(p))
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return desc
}

// restart replaces a DVM that lost a process with a new one.
func (w *WarmDVM) restart(ctx context.Context) error {
	_ = w.Stop(ctx) // what it says is about the broken DVM
	n, err := StartWarm(ctx, w.dynrun, w.parent, w.slots, w.baseEnv)
	if err != nil {
		return err
	}
	*w = *n
	return nil
}
