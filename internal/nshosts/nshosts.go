// Package nshosts builds test hosts on this machine out of Linux
// namespaces, for tests and scripts that need several "machines": each host
// is a network namespace with its own address, plus a UTS namespace with its
// own hostname, and optionally its own sshd. The filesystem stays shared,
// like a shared home directory on a cluster; only the rendezvous directory
// ($DYNRT_DIR of ssh sessions) is per host.
//
// Layout of a cluster with prefix P:
//
//	netns P-br      a bridge br0, one port vN per host; no address
//	netns P-<host>  eth0 (the other end of vN) with 198.18.X.(i+1)/24, lo
//	UTS namespace   bind-mounted at /run/dynrt-nshosts/clusters/P/uts/<host>
//	/etc/netns/P-<host>/hosts   the cluster's /etc/hosts (ip netns exec
//	                mounts it over /etc/hosts)
//	sshd            `sshd -D -f <dir>/<host>/sshd_config`, listening on the
//	                host's address
//
// Nothing is routed to the root namespace: the bridge lives in its own
// namespace and the root namespace has no interface on it, so no packet a
// test sends can leave. Each cluster claims its own /24 of 198.18.0.0/15
// (a symlink under /run/dynrt-nshosts/subnets), so parallel clusters never
// share addresses either.
//
// The registry /run/dynrt-nshosts/clusters/P/state.json records what a
// cluster made, so that Down (scripts/nshosts.sh down) and Reap (stale
// clusters of killed test runs) can tear down a cluster they did not build.
package nshosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
)

// Registry is where clusters are recorded; on tmpfs, gone after a reboot
// like the namespaces themselves.
const Registry = "/run/dynrt-nshosts"

// EnvDir is the rendezvous directory variable set in every host's sessions
// (lib/dvmdir.EnvDir; not imported to keep this package free of the runtime).
const EnvDir = "DYNRT_DIR"

// Config describes a cluster.
type Config struct {
	// Prefix starts every name the cluster creates (namespaces, files).
	Prefix string
	// Hosts are the hostnames; nil means h0..h<K-1>.
	Hosts []string
	// K is the number of hosts when Hosts is nil (0: 3).
	K int
	// SSH starts an sshd per host and writes a client config.
	SSH bool
	// Env is set in every ssh session of every host (KEY=VALUE), after
	// $DYNRT_DIR and HOME (SessionEnv); e.g. a PATH that finds dynrun,
	// or HOME=/root to run root's dotfiles.
	Env []string
	// Owner is the pid of the process that owns the cluster: Reap tears
	// down clusters whose owner is gone. 0 marks a cluster made by hand
	// (scripts/nshosts.sh up), which only Down removes.
	Owner int
	// Logger receives what is done; nil discards.
	Logger *slog.Logger
}

// Host is one host of a cluster.
type Host struct {
	Name  string     // hostname and ssh alias
	Addr  netip.Addr // address in the cluster's /24
	NetNS string     // network namespace
	Dir   string     // rendezvous directory: $DYNRT_DIR in its sessions
	uts   string     // bind mount of the UTS namespace
	port  string     // veth end on the bridge
}

// Cluster is a set of namespace hosts. Close tears it down.
type Cluster struct {
	plan  Plan
	files Files
	reg   string // registry directory of the cluster
	env   []string
	hosts []*Host
	log   *slog.Logger

	mu     sync.Mutex
	closed bool
	sshd   map[string]*exec.Cmd
	nsIDs  map[string]bool // "net:[inode]", "uts:[inode]" of its namespaces, as /proc/<pid>/ns shows them
}

// state is what the registry records about a cluster.
type state struct {
	Plan       Plan
	Dir        string // temporary directory (Files.Dir)
	Owner      int
	OwnerStart string   // start time of Owner (/proc/<pid>/stat field 22), against pid reuse
	Env        []string // Config.Env
}

// New builds a cluster. On error everything made so far is torn down.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hosts := cfg.Hosts
	if hosts == nil {
		k := cfg.K
		if k == 0 {
			k = 3
		}
		hosts = DefaultHosts(k)
	}
	// Validate names before touching anything.
	if _, err := NewPlan(cfg.Prefix, hosts, 0); err != nil {
		return nil, err
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(kv, "\"\n") {
			return nil, fmt.Errorf("nshosts: session environment %q: want KEY=VALUE without quotes or newlines", kv)
		}
	}
	reg := clusterDir(cfg.Prefix)
	if err := os.MkdirAll(filepath.Dir(reg), 0o755); err != nil {
		return nil, fmt.Errorf("nshosts: registry: %w", err)
	}
	if err := os.Mkdir(reg, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("nshosts: a cluster with prefix %s exists (%s); tear it down with `scripts/nshosts.sh down %s`", cfg.Prefix, reg, cfg.Prefix)
		}
		return nil, fmt.Errorf("nshosts: registry: %w", err)
	}
	st := state{Plan: Plan{Prefix: cfg.Prefix, Subnet: -1}, Owner: cfg.Owner, OwnerStart: procStart(cfg.Owner), Env: cfg.Env}
	c := &Cluster{reg: reg, log: log.With("cluster", cfg.Prefix), sshd: map[string]*exec.Cmd{}, nsIDs: map[string]bool{}}
	fail := func(err error) (*Cluster, error) {
		if cerr := c.Close(); cerr != nil {
			err = fmt.Errorf("%w (and tearing down: %v)", err, cerr)
		}
		return nil, err
	}
	// Record the cluster before making anything, so that a kill at any
	// later point leaves something Reap can find.
	if err := writeState(reg, st); err != nil {
		return fail(err)
	}
	subnet, err := claimSubnet(cfg.Prefix)
	if err != nil {
		return fail(err)
	}
	st.Plan.Subnet = subnet
	plan, err := NewPlan(cfg.Prefix, hosts, subnet)
	if err != nil {
		return fail(err)
	}
	st.Plan = plan
	dir, err := os.MkdirTemp("", "dynrt-nshosts-"+cfg.Prefix+"-")
	if err != nil {
		return fail(fmt.Errorf("nshosts: %w", err))
	}
	st.Dir = dir
	c.plan, c.files = plan, NewFiles(dir)
	c.hosts = hostsOf(plan, c.files, reg)
	if err := writeState(reg, st); err != nil {
		return fail(err)
	}
	c.env = append([]string{EnvDir + "="}, cfg.Env...) // DYNRT_DIR filled per host
	if err := c.build(ctx); err != nil {
		return fail(err)
	}
	if cfg.SSH {
		if err := c.startSSH(ctx); err != nil {
			return fail(err)
		}
	}
	c.log.Info("cluster up", "hosts", len(c.hosts), "network", plan.Network(), "dir", dir)
	return c, nil
}

func clusterDir(prefix string) string { return filepath.Join(Registry, "clusters", prefix) }

func hostsOf(p Plan, f Files, reg string) []*Host {
	var out []*Host
	for _, h := range p.Hosts {
		out = append(out, &Host{
			Name: h.Name, Addr: h.Addr, NetNS: h.NetNS, Dir: f.RunDir(h.Name),
			uts: filepath.Join(reg, "uts", h.Name), port: h.PortIf,
		})
	}
	return out
}

func writeState(reg string, st state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(reg, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("nshosts: registry: %w", err)
	}
	return os.Rename(tmp, filepath.Join(reg, "state.json"))
}

// claimSubnet takes the first free /24 from FirstSubnet(prefix) on: the
// claim is a symlink named after the index, made atomically.
func claimSubnet(prefix string) (int, error) {
	dir := filepath.Join(Registry, "subnets")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("nshosts: registry: %w", err)
	}
	first := FirstSubnet(prefix)
	for i := range Subnets {
		n := (first + i) % Subnets
		err := os.Symlink(prefix, filepath.Join(dir, strconv.Itoa(n)))
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return 0, fmt.Errorf("nshosts: claim a subnet: %w", err)
		}
	}
	return 0, fmt.Errorf("nshosts: all %d subnets of 198.18.0.0/15 are taken (see %s; `scripts/nshosts.sh reap` removes stale ones)", Subnets, dir)
}

func releaseSubnet(prefix string, n int) error {
	p := filepath.Join(Registry, "subnets", strconv.Itoa(n))
	if owner, err := os.Readlink(p); err == nil && owner == prefix {
		return os.Remove(p)
	}
	return nil
}

// run runs a system command and returns its error with its output.
func run(ctx context.Context, argv ...string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// build makes the namespaces, links, addresses, hostnames and hosts files.
func (c *Cluster) build(ctx context.Context) error {
	br := c.plan.Bridge
	steps := [][]string{
		{"ip", "netns", "add", br},
		{"ip", "-n", br, "link", "set", "lo", "up"},
		{"ip", "-n", br, "link", "add", BridgeIf, "type", "bridge"},
		{"ip", "-n", br, "link", "set", BridgeIf, "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return fmt.Errorf("nshosts: bridge: %w", err)
		}
	}
	c.recordNS("net", filepath.Join("/run/netns", br))
	if err := os.MkdirAll(filepath.Join(c.reg, "uts"), 0o755); err != nil {
		return fmt.Errorf("nshosts: %w", err)
	}
	hostsFile := RenderHosts(c.plan)
	for _, h := range c.hosts {
		if err := c.buildHost(ctx, h, hostsFile); err != nil {
			return fmt.Errorf("nshosts: host %s: %w", h.Name, err)
		}
	}
	return nil
}

func (c *Cluster) buildHost(ctx context.Context, h *Host, hostsFile string) error {
	br := c.plan.Bridge
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return err
	}
	etc := filepath.Join("/etc/netns", h.NetNS)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte(hostsFile), 0o644); err != nil {
		return err
	}
	// A persistent UTS namespace, held by a bind mount like ip netns holds
	// network namespaces.
	if err := os.WriteFile(h.uts, nil, 0o644); err != nil {
		return err
	}
	steps := [][]string{
		{"unshare", "--uts=" + h.uts, "hostname", h.Name},
		{"ip", "netns", "add", h.NetNS},
		{"ip", "-n", h.NetNS, "link", "set", "lo", "up"},
		{"ip", "-n", br, "link", "add", h.port, "type", "veth", "peer", "name", HostIf, "netns", h.NetNS},
		{"ip", "-n", br, "link", "set", h.port, "master", BridgeIf},
		{"ip", "-n", br, "link", "set", h.port, "up"},
		{"ip", "-n", h.NetNS, "addr", "add", h.Addr.String() + "/24", "dev", HostIf},
		{"ip", "-n", h.NetNS, "link", "set", HostIf, "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return err
		}
	}
	c.recordNS("uts", h.uts)
	c.recordNS("net", filepath.Join("/run/netns", h.NetNS))
	return nil
}

// recordNS remembers the identity of the namespace mounted at file, to find
// processes in it after its name is gone (Remains).
func (c *Cluster) recordNS(kind, file string) {
	var st syscall.Stat_t
	if syscall.Stat(file, &st) == nil {
		c.mu.Lock()
		c.nsIDs[fmt.Sprintf("%s:[%d]", kind, st.Ino)] = true
		c.mu.Unlock()
	}
}

// startSSH generates the keys and configs and starts one sshd per host.
func (c *Cluster) startSSH(ctx context.Context) error {
	for _, tool := range []string{"ssh-keygen", SSHD} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("nshosts: %s not found: install openssh-server (make deps-hosts)", tool)
		}
	}
	// sshd's privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return fmt.Errorf("nshosts: %w", err)
	}
	f := c.files
	if err := run(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "nshosts-"+c.plan.Prefix, "-f", f.ClientKey); err != nil {
		return fmt.Errorf("nshosts: client key: %w", err)
	}
	pub, err := os.ReadFile(f.ClientKey + ".pub")
	if err != nil {
		return fmt.Errorf("nshosts: %w", err)
	}
	if err := os.WriteFile(f.Authorized, pub, 0o600); err != nil {
		return fmt.Errorf("nshosts: %w", err)
	}
	if err := os.Mkdir(f.Home(), 0o700); err != nil {
		return fmt.Errorf("nshosts: %w", err)
	}
	if err := os.WriteFile(f.SSHConfig, []byte(RenderSSHConfig(f, c.plan)), 0o644); err != nil {
		return fmt.Errorf("nshosts: %w", err)
	}
	for i, h := range c.hosts {
		if err := c.startSSHD(ctx, h, c.plan.Hosts[i]); err != nil {
			return fmt.Errorf("nshosts: host %s: sshd: %w", h.Name, err)
		}
	}
	return nil
}

// SSHD is the sshd binary (Debian's openssh-server).
const SSHD = "/usr/sbin/sshd"

func (c *Cluster) startSSHD(ctx context.Context, h *Host, hp HostPlan) error {
	f := c.files
	if err := run(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.Name, "-f", f.HostKey(h.Name)); err != nil {
		return err
	}
	env := SessionEnv(f, h.Name, c.env[1:])
	if err := os.WriteFile(f.SSHDConfig(h.Name), []byte(RenderSSHDConfig(f, hp, env)), 0o644); err != nil {
		return err
	}
	// Not tied to ctx: the sshd lives as long as the cluster, also past
	// the process that made it (scripts/nshosts.sh up).
	cmd := c.Command(context.Background(), h.Name, SSHD, "-D", "-f", f.SSHDConfig(h.Name), "-E", f.SSHDLog(h.Name))
	cmd.Env = os.Environ()
	// Its own session: a ^C in the terminal of `nshosts up` or a signal to
	// the test's process group does not reach it; Close ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.mu.Lock()
	c.sshd[h.Name] = cmd
	c.mu.Unlock()
	// sshd writes its pid file once it listens.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(f.SSHDPid(h.Name)); err == nil {
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(f.SSHDLog(h.Name))
			return fmt.Errorf("exited before listening: %s: %s", cmd.ProcessState, bytes.TrimSpace(log))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no pid file %s after 10s", f.SSHDPid(h.Name))
		}
	}
}

// Hosts returns the hosts in the order of Config.Hosts.
func (c *Cluster) Hosts() []*Host { return c.hosts }

// Host returns the host called name, or nil.
func (c *Cluster) Host(name string) *Host {
	for _, h := range c.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Prefix returns the cluster's prefix.
func (c *Cluster) Prefix() string { return c.plan.Prefix }

// Network returns the cluster's /24.
func (c *Cluster) Network() netip.Prefix { return c.plan.Network() }

// Dir returns the cluster's temporary directory (keys, configs, the hosts'
// rendezvous directories).
func (c *Cluster) Dir() string { return c.files.Dir }

// SSHConfig returns the path of the ssh client config: `ssh -F <it> h1 cmd`
// works from any host (and from nowhere else: the root namespace has no
// route to the hosts).
func (c *Cluster) SSHConfig() string { return c.files.SSHConfig }

// HostsFile returns the path of the /etc/hosts every host sees.
func (c *Cluster) HostsFile() string {
	return filepath.Join("/etc/netns", c.hosts[0].NetNS, "hosts")
}

// Command returns a command that runs argv in host's network and UTS
// namespaces, with the cluster's /etc/hosts, like a command typed on that
// host: its environment is this process's with $DYNRT_DIR set to the
// host's rendezvous directory and Config.Env added. It panics on an unknown
// host (a bug in the test).
func (c *Cluster) Command(ctx context.Context, host string, argv ...string) *exec.Cmd {
	h := c.Host(host)
	if h == nil {
		panic("nshosts: no host " + host + " in cluster " + c.plan.Prefix)
	}
	// ip netns exec mounts /etc/netns/<ns>/hosts over /etc/hosts in a new
	// mount namespace; nsenter then joins the UTS namespace. Both exec, so
	// the command's pid is argv's.
	full := append([]string{"ip", "netns", "exec", h.NetNS, "nsenter", "--uts=" + h.uts, "--"}, argv...)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = append(os.Environ(), EnvDir+"="+h.Dir)
	cmd.Env = append(cmd.Env, c.env[1:]...)
	return cmd
}

// SSH returns a command that runs `ssh -F <config> to cmd` inside host
// from: what a user on from would type.
func (c *Cluster) SSH(ctx context.Context, from, to string, remote ...string) *exec.Cmd {
	return c.Command(ctx, from, append([]string{"ssh", "-F", c.SSHConfig(), to}, remote...)...)
}

// Cut takes host's link down on the bridge side, like a pulled cable:
// packets to and from it are dropped, the host itself notices only the
// missing carrier.
func (c *Cluster) Cut(ctx context.Context, host string) error {
	return c.link(ctx, host, "down")
}

// Restore puts host's link up again after Cut.
func (c *Cluster) Restore(ctx context.Context, host string) error {
	return c.link(ctx, host, "up")
}

func (c *Cluster) link(ctx context.Context, host, state string) error {
	h := c.Host(host)
	if h == nil {
		return fmt.Errorf("nshosts: no host %s in cluster %s", host, c.plan.Prefix)
	}
	if err := run(ctx, "ip", "-n", c.plan.Bridge, "link", "set", h.port, state); err != nil {
		return fmt.Errorf("nshosts: link of %s %s: %w", host, state, err)
	}
	return nil
}

// SSHDPid returns the pid of host's sshd listener (0 without ssh).
func (c *Cluster) SSHDPid(host string) int {
	c.mu.Lock()
	cmd := c.sshd[host]
	c.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		return cmd.Process.Pid
	}
	// A cluster from Open: its pid file.
	b, err := os.ReadFile(c.files.SSHDPid(host))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Open returns the cluster with exactly this prefix, made by another
// process (scripts/nshosts.sh up), to run commands on its hosts. Its Close
// tears it down like Down.
func Open(prefix string, log *slog.Logger) (*Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := clusterDir(prefix)
	st, ok := readState(reg)
	if !ok || len(st.Plan.Hosts) == 0 {
		return nil, fmt.Errorf("nshosts: no cluster %s (see `scripts/nshosts.sh list`)", prefix)
	}
	c := &Cluster{plan: st.Plan, files: NewFiles(st.Dir), reg: reg, log: log.With("cluster", prefix),
		sshd: map[string]*exec.Cmd{}, nsIDs: map[string]bool{}}
	c.hosts = hostsOf(st.Plan, c.files, reg)
	c.env = append([]string{EnvDir + "="}, st.Env...)
	for _, h := range c.hosts {
		c.recordNS("uts", h.uts)
		c.recordNS("net", filepath.Join("/run/netns", h.NetNS))
	}
	c.recordNS("net", filepath.Join("/run/netns", st.Plan.Bridge))
	return c, nil
}

// Pids lists the processes in host's network namespace.
func (c *Cluster) Pids(ctx context.Context, host string) ([]int, error) {
	h := c.Host(host)
	if h == nil {
		return nil, fmt.Errorf("nshosts: no host %s in cluster %s", host, c.plan.Prefix)
	}
	return NetNSPids(ctx, h.NetNS)
}

// Leftovers lists what runs on host besides its sshd listener, as
// "pid cmdline" strings: what a test expects gone after a DVM stopped.
func (c *Cluster) Leftovers(ctx context.Context, host string) ([]string, error) {
	pids, err := c.Pids(ctx, host)
	if err != nil {
		return nil, err
	}
	sshd := c.SSHDPid(host)
	var out []string
	for _, pid := range pids {
		if pid == sshd || pid == os.Getpid() {
			continue
		}
		out = append(out, strconv.Itoa(pid)+" "+strings.Join(leakcheck.Cmdline(pid), " "))
	}
	return out, nil
}

// NetNSPids lists the processes in the network namespace ns (ip netns pids).
func NetNSPids(ctx context.Context, ns string) ([]int, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("nshosts: ip netns pids %s: %w", ns, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids, nil
}

// procStart returns the start time of pid (field 22 of /proc/pid/stat),
// "" when it does not run.
func procStart(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// Close tears the cluster down: every process in its namespaces (sshd and
// whatever sessions left), the namespaces with their links, the mounts,
// /etc/netns entries, the temporary directory and the registry entry. It
// may be called more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	st := state{Plan: c.plan, Dir: c.files.Dir}
	if c.plan.Prefix == "" { // New failed before planning
		if b, err := os.ReadFile(filepath.Join(c.reg, "state.json")); err == nil {
			_ = json.Unmarshal(b, &st)
		}
	}
	err := teardown(context.Background(), c.reg, st, c.log)
	if err == nil {
		c.log.Info("cluster down")
	}
	return err
}
