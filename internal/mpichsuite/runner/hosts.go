package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/internal/mpichsuite"
	"github.com/dynrt/dynrt/internal/nshosts"
)

// HostsPrefix starts the names of the suite's namespace hosts; a run's
// cluster adds its pid, and a new run reaps the clusters of runs that died.
const HostsPrefix = "dyn-mpichsuite"

// HostsDVM is the DVM of the dynrun-hosts runner: mpichsuite.HostCount
// network-namespace hosts with their own sshd (internal/nshosts), the
// master on h0 and one daemon per other host started by dynrun's ssh
// launcher, as on a small cluster with a shared filesystem. Tests are
// launched on h0 and their ranks spread over the hosts (--map-by node).
type HostsDVM struct {
	ID     string
	c      *nshosts.Cluster
	dynrun string
	prefix string   // dynrun is prefix/bin/dynrun (--prefix)
	env    []string // the environment of commands on h0
	mark   string
	exe    string         // dynrun, resolved as /proc shows it
	procs  map[int]bool   // master and daemons
	names  map[int]string // their command lines at the start (Lost)
	wrap   []string       // runs a command on h0
	config string
	slots  int
}

// HostsUnsupported says why the dynrun-hosts runner cannot run here ("" if
// it can): the namespace hosts need root, or dynrun is not in a bin/
// directory that can serve as the remote --prefix.
func HostsUnsupported(dynrun string) string {
	if why := nshosts.Unsupported(true); why != "" {
		return why
	}
	if filepath.Base(filepath.Dir(dynrun)) != "bin" {
		return fmt.Sprintf("dynrun (%s) must be in a directory named bin: the hosts run PREFIX/bin/dynrun (--prefix)", dynrun)
	}
	return ""
}

// StartHosts builds the hosts and starts the DVM with slots slots per
// host. env is the environment of the build.
func StartHosts(ctx context.Context, log *slog.Logger, dynrun string, slots int, env []string) (*HostsDVM, error) {
	if why := HostsUnsupported(dynrun); why != "" {
		return nil, fmt.Errorf("runner %s: %s", mpichsuite.DynrunHosts, why)
	}
	dynrun, err := filepath.Abs(dynrun)
	if err != nil {
		return nil, err
	}
	if err := nshosts.Reap(ctx, HostsPrefix, log); err != nil {
		log.Warn("reaping the hosts of an earlier run", "err", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := nshosts.New(cctx, nshosts.Config{
		Prefix: HostsPrefix + "-" + strconv.Itoa(os.Getpid()), K: mpichsuite.HostCount, SSH: true,
		Owner: os.Getpid(), Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("runner %s: build the hosts: %w", mpichsuite.DynrunHosts, err)
	}
	h0 := c.Hosts()[0]
	w := &HostsDVM{c: c, dynrun: dynrun, prefix: filepath.Dir(filepath.Dir(dynrun)), mark: randomHex(8), slots: slots}
	// c.Command(ctx, "h0") alone is the wrapper that puts a command on h0.
	w.wrap = c.Command(ctx, h0.Name).Args
	w.env = append(env, nshosts.EnvDir+"="+h0.Dir)
	var hostList []string
	for _, h := range c.Hosts() {
		hostList = append(hostList, h.Name+":"+strconv.Itoa(slots))
	}
	w.config = fmt.Sprintf("%d hosts × %d slots, ssh launcher", len(hostList), slots)
	if w.exe, err = filepath.EvalSymlinks(dynrun); err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := w.start(ctx, strings.Join(hostList, ","), h0.Addr.String()); err != nil {
		w.kill()
		_ = c.Close()
		return nil, err
	}
	return w, nil
}

func (w *HostsDVM) start(ctx context.Context, hostList, bind string) error {
	argv := append(append([]string(nil), w.wrap...), w.dynrun, "dvm", "start", "--launcher", "ssh", "--host", hostList,
		"--launch-agent", "ssh -F "+w.c.SSHConfig(), "--prefix", w.prefix, "--bind", bind+":0", "--daemonize")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append([]string(nil), w.env...), leakcheck.EnvMark+"="+w.mark)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("start the DVM over the hosts (%s): %w: %s", w.config, err, strings.TrimSpace(stderr.String()))
	}
	w.ID = strings.TrimSpace(string(out))
	// The master carries the mark; the remote daemons, started through
	// sshd, do not: they are the dynrun processes in the hosts' namespaces.
	w.procs = map[int]bool{}
	for _, p := range leakcheck.MarkedProcs(w.mark) {
		w.procs[p] = true
	}
	for _, h := range w.c.Hosts() {
		pids, err := w.c.Pids(ctx, h.Name)
		if err != nil {
			return err
		}
		for _, p := range pids {
			if exe, _ := os.Readlink("/proc/" + strconv.Itoa(p) + "/exe"); exe == w.exe {
				w.procs[p] = true
			}
		}
	}
	if len(w.procs) < mpichsuite.HostCount {
		return fmt.Errorf("DVM %s over the hosts started, but only %d of its %d processes can be found", w.ID, len(w.procs), mpichsuite.HostCount)
	}
	w.names = cmdlines(w.procs)
	return nil
}

// Lost describes the processes of the DVM that no longer run.
func (w *HostsDVM) Lost() []string { return lost(w.procs, w.names) }

// Alive reports whether every process of the DVM still runs.
func (w *HostsDVM) Alive() bool { return allAlive(w.procs) }

// Stop stops the DVM, tears the hosts down and reports what was left.
func (w *HostsDVM) Stop(ctx context.Context) error {
	errs := w.stopDVM(ctx)
	if err := w.c.Close(); err != nil {
		errs = append(errs, "tearing down the hosts: "+err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (w *HostsDVM) stopDVM(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	argv := append(append([]string(nil), w.wrap...), w.dynrun, "dvm", "stop", "--dvm", w.ID)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = w.env
	out, err := cmd.CombinedOutput()
	var errs []string
	if err != nil {
		errs = append(errs, fmt.Sprintf("dynrun dvm stop --dvm %s: %v: %s", w.ID, err, strings.TrimSpace(string(out))))
	}
	deadline := time.Now().Add(Grace)
	for !w.gone() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := w.kill(); len(left) > 0 {
		errs = append(errs, "the DVM over the hosts left running: "+strings.Join(left, "; "))
	}
	return errs
}

func (w *HostsDVM) gone() bool {
	for p := range w.procs {
		if leakcheck.Alive(p) {
			return false
		}
	}
	return len(leakcheck.MarkedProcs(w.mark)) == 0
}

// kill kills the DVM's processes still running and describes them.
func (w *HostsDVM) kill() []string {
	var desc []string
	seen := map[int]bool{}
	for _, p := range leakcheck.MarkedProcs(w.mark) {
		seen[p] = true
	}
	for p := range w.procs {
		if leakcheck.Alive(p) {
			seen[p] = true
		}
	}
	for p := range seen {
		desc = append(desc, describe(p))
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return desc
}

// restart replaces a DVM that lost a process, on the same hosts.
func (w *HostsDVM) restart(ctx context.Context) error {
	_ = w.stopDVM(ctx) // what it says is about the broken DVM
	w.mark = randomHex(8)
	var hostList []string
	for _, h := range w.c.Hosts() {
		hostList = append(hostList, h.Name+":"+strconv.Itoa(w.slots))
	}
	return w.start(ctx, strings.Join(hostList, ","), w.c.Hosts()[0].Addr.String())
}
