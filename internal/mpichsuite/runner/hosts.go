package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
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
	"github.com/dynrt/dynrt/internal/nshosts"
)

// HostsPrefix starts the names of the suite's namespace hosts; a run's
// cluster adds its pid, and a new run reaps the clusters of runs that died.
const HostsPrefix = "dyn-mpichsuite"

// Hosts are the namespace hosts of the runners dynrun-hosts and
// hydra-hosts, one cluster per build shared by both: mpichsuite.HostCount
// network-namespace hosts with their own sshd (internal/nshosts), as a
// small cluster with a shared filesystem. Commands are typed on h0.
// With the DVM (dynrun-hosts), its master runs on h0 and one daemon per
// other host is started by dynrun's ssh launcher; tests are launched on h0
// and their ranks spread over the hosts (--map-by node). hydra-hosts runs
// mpiexec.hydra on h0 with its ssh launcher over the same hosts.
type Hosts struct {
	ID     string // the DVM's id; "" without the DVM
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
	// hosts are the hostnames, sshExec the script mpiexec.hydra's
	// -launcher-exec runs (ssh with the cluster's config: Hydra takes
	// one executable there, no arguments).
	hosts   []string
	sshExec string
	// netns are the hosts' network namespaces ("net:[inode]" as
	// /proc/<pid>/ns/net shows them): a process of a test may run there
	// without the test's mark (Hydra's proxies started by sshd).
	netns map[string]bool
}

// HostsUnsupported says why the namespace hosts cannot be built here (""
// if they can): they need root. With dynrun set (the DVM of dynrun-hosts),
// dynrun must also be in a bin/ directory that can serve as the remote
// --prefix.
func HostsUnsupported(dynrun string) string {
	if why := nshosts.Unsupported(true); why != "" {
		return why
	}
	if dynrun != "" && filepath.Base(filepath.Dir(dynrun)) != "bin" {
		return fmt.Sprintf("dynrun (%s) must be in a directory named bin: the hosts run PREFIX/bin/dynrun (--prefix)", dynrun)
	}
	return ""
}

// HostsConfig describes the hosts to start.
type HostsConfig struct {
	// Prefix starts the cluster's names (default HostsPrefix); the pid
	// is added.
	Prefix string
	// Dynrun, if set, starts the DVM of dynrun-hosts with this binary
	// and Slots slots per host.
	Dynrun string
	Slots  int
	Env    []string // the environment of the build
}

// StartHosts builds the hosts and, with cfg.Dynrun, starts the DVM.
func StartHosts(ctx context.Context, log *slog.Logger, cfg HostsConfig) (*Hosts, error) {
	if why := HostsUnsupported(cfg.Dynrun); why != "" {
		return nil, fmt.Errorf("runners %s/%s: %s", mpichsuite.HydraHosts, mpichsuite.DynrunHosts, why)
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = HostsPrefix
	}
	if err := nshosts.Reap(ctx, prefix, log); err != nil {
		log.Warn("reaping the hosts of an earlier run", "err", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := nshosts.New(cctx, nshosts.Config{
		Prefix: prefix + "-" + strconv.Itoa(os.Getpid()), K: mpichsuite.HostCount, SSH: true,
		Owner: os.Getpid(), Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("runners %s/%s: build the hosts: %w", mpichsuite.HydraHosts, mpichsuite.DynrunHosts, err)
	}
	h0 := c.Hosts()[0]
	w := &Hosts{c: c, mark: randomHex(8), slots: cfg.Slots, netns: map[string]bool{}}
	// c.Command(ctx, "h0") alone is the wrapper that puts a command on h0.
	w.wrap = c.Command(ctx, h0.Name).Args
	w.env = append(slices.Clone(cfg.Env), nshosts.EnvDir+"="+h0.Dir)
	var hostList []string
	for _, h := range c.Hosts() {
		w.hosts = append(w.hosts, h.Name)
		hostList = append(hostList, h.Name+":"+strconv.Itoa(cfg.Slots))
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/run/netns", h.NetNS), &st); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("the network namespace of host %s: %w", h.Name, err)
		}
		w.netns[fmt.Sprintf("net:[%d]", st.Ino)] = true
	}
	w.sshExec = filepath.Join(c.Dir(), "hydra-ssh")
	script := "#!/bin/sh\n# mpiexec.hydra -launcher-exec: ssh with the hosts' config\nexec ssh -F '" + c.SSHConfig() + "' \"$@\"\n"
	if err := os.WriteFile(w.sshExec, []byte(script), 0o755); err != nil {
		_ = c.Close()
		return nil, err
	}
	if cfg.Dynrun == "" {
		return w, nil
	}
	if w.dynrun, err = filepath.Abs(cfg.Dynrun); err != nil {
		_ = c.Close()
		return nil, err
	}
	w.prefix = filepath.Dir(filepath.Dir(w.dynrun))
	w.config = fmt.Sprintf("%d hosts × %d slots, ssh launcher", len(hostList), cfg.Slots)
	if w.exe, err = filepath.EvalSymlinks(w.dynrun); err != nil {
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

func (w *Hosts) start(ctx context.Context, hostList, bind string) error {
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
func (w *Hosts) Lost() []string { return lost(w.procs, w.names) }

// Alive reports whether every process of the DVM still runs (true without
// the DVM).
func (w *Hosts) Alive() bool { return allAlive(w.procs) }

// Stop stops the DVM, tears the hosts down and reports what was left.
func (w *Hosts) Stop(ctx context.Context) error {
	var errs []string
	if w.ID != "" {
		errs = w.stopDVM(ctx)
	}
	if err := w.c.Close(); err != nil {
		errs = append(errs, "tearing down the hosts: "+err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (w *Hosts) stopDVM(ctx context.Context) []string {
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

func (w *Hosts) gone() bool {
	for p := range w.procs {
		if leakcheck.Alive(p) {
			return false
		}
	}
	return len(leakcheck.MarkedProcs(w.mark)) == 0
}

// kill kills the DVM's processes still running and describes them.
func (w *Hosts) kill() []string {
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
func (w *Hosts) restart(ctx context.Context) error {
	_ = w.stopDVM(ctx) // what it says is about the broken DVM
	w.mark = randomHex(8)
	var hostList []string
	for _, h := range w.c.Hosts() {
		hostList = append(hostList, h.Name+":"+strconv.Itoa(w.slots))
	}
	return w.start(ctx, strings.Join(hostList, ","), w.c.Hosts()[0].Addr.String())
}
