package nshosts

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// Subnets is the number of /24 networks in the test range 198.18.0.0/15
// (RFC 2544, benchmarking): one per cluster.
const Subnets = 512

// MaxHosts bounds a cluster: host i gets .(i+1) in its /24.
const MaxHosts = 250

// Interface names inside the namespaces. Each namespace has its own set of
// interface names, so these never collide between clusters, and none of
// them exists in the root namespace.
const (
	BridgeIf = "br0"  // the bridge, in the bridge namespace
	HostIf   = "eth0" // a host's end of its veth pair, in the host namespace
)

// Plan is the layout of a cluster: names and addresses, computed without
// touching the system.
type Plan struct {
	Prefix string // cluster prefix: every name starts with it
	Subnet int    // index of the /24 in 198.18.0.0/15
	Bridge string // network namespace of the bridge
	Hosts  []HostPlan
}

// HostPlan is one host of a Plan.
type HostPlan struct {
	Name   string     // hostname (UTS) and ssh alias
	NetNS  string     // network namespace: <prefix>-<name>
	Addr   netip.Addr // address on HostIf
	PortIf string     // the veth end on the bridge (in the bridge namespace)
}

// Prefix returns the /24 of subnet index n, n in [0, Subnets).
func Prefix(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, byte(18 + n/256), byte(n % 256), 0}), 24)
}

// Network returns the cluster's /24.
func (p Plan) Network() netip.Prefix { return Prefix(p.Subnet) }

// Host returns the plan of the host called name.
func (p Plan) Host(name string) (HostPlan, bool) {
	for _, h := range p.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return HostPlan{}, false
}

// NewPlan lays out a cluster of the named hosts (nil: h0..h<k-1> is the
// caller's job, see DefaultHosts) on subnet index subnet.
func NewPlan(prefix string, hosts []string, subnet int) (Plan, error) {
	if err := checkName("prefix", prefix); err != nil {
		return Plan{}, err
	}
	if len(hosts) == 0 {
		return Plan{}, fmt.Errorf("nshosts: no hosts")
	}
	if len(hosts) > MaxHosts {
		return Plan{}, fmt.Errorf("nshosts: %d hosts, at most %d fit in a /24", len(hosts), MaxHosts)
	}
	if subnet < 0 || subnet >= Subnets {
		return Plan{}, fmt.Errorf("nshosts: subnet index %d out of [0, %d)", subnet, Subnets)
	}
	p := Plan{Prefix: prefix, Subnet: subnet, Bridge: prefix + "-br"}
	seen := map[string]bool{}
	base := Prefix(subnet).Addr().As4()
	for i, h := range hosts {
		if err := checkName("host name", h); err != nil {
			return Plan{}, err
		}
		if h == "br" {
			return Plan{}, fmt.Errorf("nshosts: host name %q is taken by the bridge namespace", h)
		}
		if seen[h] {
			return Plan{}, fmt.Errorf("nshosts: host %q named twice", h)
		}
		seen[h] = true
		a := base
		a[3] = byte(i + 1)
		p.Hosts = append(p.Hosts, HostPlan{
			Name: h, NetNS: prefix + "-" + h, Addr: netip.AddrFrom4(a), PortIf: fmt.Sprintf("v%d", i),
		})
	}
	return p, nil
}

// DefaultHosts returns h0..h<k-1>.
func DefaultHosts(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("h%d", i)
	}
	return out
}

// checkName accepts what is safe as a namespace name, a hostname, a file
// name and a word in a config file: lowercase letters, digits and '-', not
// starting or ending with '-'.
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("nshosts: empty %s", what)
	}
	if len(s) > 40 {
		return fmt.Errorf("nshosts: %s %q is longer than 40 characters", what, s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("nshosts: %s %q: character %q (use lowercase letters, digits and '-')", what, s, c)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return fmt.Errorf("nshosts: %s %q starts or ends with '-'", what, s)
	}
	return nil
}

// FirstSubnet is where the search for a free /24 starts for prefix: a hash,
// so that clusters of different prefixes usually get different subnets at
// the first try.
func FirstSubnet(prefix string) int {
	h := fnv.New32a()
	h.Write([]byte(prefix))
	return int(h.Sum32() % Subnets)
}

// Files are the paths of a cluster's generated files, all under Dir.
type Files struct {
	Dir           string // the cluster's temporary directory
	ClientKey     string // private key of the ssh client (public: + ".pub")
	Authorized    string // authorized_keys of every sshd
	SSHConfig     string // ssh client config (Host <name> entries)
	KnownHostsOff string // "/dev/null": host keys are generated per run
}

// NewFiles returns the file layout under dir.
func NewFiles(dir string) Files {
	return Files{
		Dir:           dir,
		ClientKey:     filepath.Join(dir, "id_ed25519"),
		Authorized:    filepath.Join(dir, "authorized_keys"),
		SSHConfig:     filepath.Join(dir, "ssh_config"),
		KnownHostsOff: "/dev/null",
	}
}

// HostDir is host's own directory under the cluster directory: its sshd
// files and its rendezvous directory.
func (f Files) HostDir(host string) string { return filepath.Join(f.Dir, host) }

// Home is the HOME of every host's ssh sessions: an empty directory shared
// by the hosts, so that no session runs the dotfiles of the machine's root
// (a ~/.bashrc that starts pyenv costs a second per ssh on a loaded
// machine, one that prints something breaks what tests read).
func (f Files) Home() string { return filepath.Join(f.Dir, "home") }

// SessionEnv is the environment sshd sets in host's sessions (SetEnv): the
// host's own $DYNRT_DIR, HOME=Home() unless env sets HOME, then env.
func SessionEnv(f Files, host string, env []string) []string {
	out := []string{EnvDir + "=" + f.RunDir(host)}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		out = append(out, "HOME="+f.Home())
	}
	return append(out, env...)
}

// RunDir is host's rendezvous directory ($DYNRT_DIR in its sessions):
// each host has its own, like separate machines, while the rest of the
// filesystem is shared.
func (f Files) RunDir(host string) string { return filepath.Join(f.HostDir(host), "run") }

// HostKey is the host key of host's sshd.
func (f Files) HostKey(host string) string {
	return filepath.Join(f.HostDir(host), "ssh_host_ed25519_key")
}

// SSHDConfig is host's sshd config file.
func (f Files) SSHDConfig(host string) string { return filepath.Join(f.HostDir(host), "sshd_config") }

// SSHDPid is host's sshd pid file.
func (f Files) SSHDPid(host string) string { return filepath.Join(f.HostDir(host), "sshd.pid") }

// SSHDLog is where host's sshd logs (-E).
func (f Files) SSHDLog(host string) string { return filepath.Join(f.HostDir(host), "sshd.log") }

// RenderHosts renders the /etc/hosts every host sees: localhost and every
// host of the cluster.
func RenderHosts(p Plan) string {
	var b strings.Builder
	b.WriteString("# generated by dynrt internal/nshosts for cluster " + p.Prefix + "\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, h := range p.Hosts {
		fmt.Fprintf(&b, "%s\t%s\n", h.Addr, h.Name)
	}
	return b.String()
}

// RenderSSHDConfig renders the sshd config of host h. env is set in every
// session (SetEnv), sorted by the caller; $DYNRT_DIR points at the host's
// own rendezvous directory.
func RenderSSHDConfig(f Files, h HostPlan, env []string) string {
	var b strings.Builder
	b.WriteString("# generated by dynrt internal/nshosts for host " + h.Name + "\n")
	fmt.Fprintf(&b, "ListenAddress %s:22\n", h.Addr)
	fmt.Fprintf(&b, "HostKey %s\n", f.HostKey(h.Name))
	fmt.Fprintf(&b, "PidFile %s\n", f.SSHDPid(h.Name))
	fmt.Fprintf(&b, "AuthorizedKeysFile %s\n", f.Authorized)
	// The keys live in a temporary directory of the shared /tmp, whose
	// modes StrictModes would reject.
	b.WriteString("StrictModes no\n")
	b.WriteString("PermitRootLogin prohibit-password\n")
	b.WriteString("PubkeyAuthentication yes\n")
	b.WriteString("PasswordAuthentication no\n")
	b.WriteString("KbdInteractiveAuthentication no\n")
	b.WriteString("UsePAM no\n")
	b.WriteString("UseDNS no\n")
	b.WriteString("PrintMotd no\n")
	b.WriteString("PrintLastLog no\n")
	b.WriteString("X11Forwarding no\n")
	// Many daemons of one DVM may connect at once.
	b.WriteString("MaxStartups 100:30:200\n")
	b.WriteString("MaxSessions 100\n")
	b.WriteString("LogLevel ERROR\n")
	b.WriteString("SetEnv")
	for _, kv := range env {
		b.WriteString(" " + quoteConfig(kv))
	}
	b.WriteString("\n")
	return b.String()
}

// RenderSSHConfig renders the ssh client config: one Host entry per host,
// usable from any host (`ssh -F <file> h1 cmd`).
func RenderSSHConfig(f Files, p Plan) string {
	var b strings.Builder
	b.WriteString("# generated by dynrt internal/nshosts for cluster " + p.Prefix + "\n")
	for _, h := range p.Hosts {
		fmt.Fprintf(&b, "Host %s\n  HostName %s\n", h.Name, h.Addr)
	}
	b.WriteString("Host *\n")
	b.WriteString("  User root\n")
	fmt.Fprintf(&b, "  IdentityFile %s\n", f.ClientKey)
	b.WriteString("  IdentitiesOnly yes\n")
	b.WriteString("  StrictHostKeyChecking no\n")
	fmt.Fprintf(&b, "  UserKnownHostsFile %s\n", f.KnownHostsOff)
	b.WriteString("  BatchMode yes\n")
	b.WriteString("  LogLevel ERROR\n")
	b.WriteString("  ConnectTimeout 10\n")
	return b.String()
}

// quoteConfig quotes a word of an ssh config file when it holds a space.
func quoteConfig(s string) string {
	if strings.ContainsAny(s, " \t") {
		return `"` + s + `"`
	}
	return s
}
