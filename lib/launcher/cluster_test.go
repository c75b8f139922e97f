package launcher

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/wire"
)

func TestSplitWords(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "ssh", want: []string{"ssh"}},
		{in: "  ssh   -o BatchMode=yes\t-p 22 ", want: []string{"ssh", "-o", "BatchMode=yes", "-p", "22"}},
		{in: "ssh -F '/a b/cfg'", want: []string{"ssh", "-F", "/a b/cfg"}},
		{in: `ssh -F "/a b/\$x \"q\" \n"`, want: []string{"ssh", "-F", `/a b/$x "q" \n`}},
		{in: `ssh -o ProxyCommand=nc\ %h\ %p`, want: []string{"ssh", "-o", "ProxyCommand=nc %h %p"}},
		{in: `a'b'"c"d`, want: []string{"abcd"}},
		{in: `'' x`, want: []string{"", "x"}},
		{in: "a\\\nb", want: []string{"ab"}},
		{in: "ssh '$HOME' ~ *", want: []string{"ssh", "$HOME", "~", "*"}}, // nothing is expanded
		{in: "ssh -F 'cfg", err: "single quote at offset 7 is never closed"},
		{in: `ssh -F "cfg`, err: "double quote at offset 7 is never closed"},
		{in: `ssh \`, err: "ends with a backslash"},
		{in: "", err: "empty command"},
		{in: "  \t ", err: "empty command"},
	}
	for _, c := range cases {
		got, err := SplitWords(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, wire.ErrInvalid) {
				t.Errorf("%q: got %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	_, err := ParseAgent("$DYNRT_SSH", "ssh -F 'x")
	if err == nil || !strings.HasPrefix(err.Error(), "$DYNRT_SSH: ") || !strings.Contains(err.Error(), "quote the ssh command") {
		t.Errorf("ParseAgent: %v", err)
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// h0 is a host with a loopback, one cluster interface and a down one.
var h0 = Self{Hostname: "h0", FQDN: "h0.cluster.example", Ifaces: []Iface{
	{Name: "lo", Up: true, Addrs: addrs("127.0.0.1", "::1")},
	{Name: "eth0", Up: true, Addrs: addrs("fe80::1", "198.18.0.1", "fd00::1")},
	{Name: "eth1", Up: true, Addrs: addrs("10.9.0.5")},
	{Name: "eth9", Up: false, Addrs: addrs("192.0.2.9")},
}}

func TestIsSelf(t *testing.T) {
	cases := []struct {
		host     string
		resolved []string
		want     bool
	}{
		{host: "h0", want: true},
		{host: "H0", want: true},
		{host: "h0.cluster.example", want: true},
		{host: "h0.cluster.example.", want: true},
		{host: "localhost", want: true},
		{host: "127.0.0.1", want: true},
		{host: "127.0.1.1", want: true}, // all of 127/8 is loopback
		{host: "::1", want: true},
		{host: "198.18.0.1", want: true},
		{host: "192.0.2.9", want: true}, // a down interface is still this host
		{host: "alias", resolved: []string{"198.18.0.1"}, want: true},
		{host: "alias-lo", resolved: []string{"127.0.0.1"}, want: true},
		{host: "h1", want: false},
		{host: "h0x", want: false},
		{host: "h0.other.example", want: false}, // same short name, another domain
		{host: "198.18.0.2", want: false},
		{host: "h1", resolved: []string{"198.18.0.2"}, want: false},
		{host: "", want: false},
	}
	for _, c := range cases {
		if got := h0.IsSelf(c.host, addrs(c.resolved...)); got != c.want {
			t.Errorf("IsSelf(%q, %v) = %v, want %v", c.host, c.resolved, got, c.want)
		}
	}
	short := Self{Hostname: "h0.cluster.example"}
	if !short.IsSelf("h0", nil) {
		t.Error("short name of an FQDN host name not matched")
	}
}

func TestHostNodes(t *testing.T) {
	cases := []struct {
		name      string
		listed    nodes
		resolved  map[string][]netip.Addr
		want      nodes
		wantHosts []string
	}{
		// prterun: the master's host takes no processes unless listed.
		{name: "not listed", listed: nodes{nd("h1", 4), nd("h2", 4)},
			want: nodes{nd("h0", 0), nd("h1", 4), nd("h2", 4)}, wantHosts: []string{"", "h1", "h2"}},
		{name: "listed first", listed: nodes{nd("h0", 2), nd("h1", 4)},
			want: nodes{nd("h0", 2), nd("h1", 4)}, wantHosts: []string{"", "h1"}},
		// Listed later under another of its names: node 0 keeps the name
		// the user gave; the order of the others is kept.
		{name: "listed by address later", listed: nodes{nd("h1", 4), nd("198.18.0.1", 3), nd("h2", 1)},
			want: nodes{nd("198.18.0.1", 3), nd("h1", 4), nd("h2", 1)}, wantHosts: []string{"", "h1", "h2"}},
		{name: "two names summed", listed: nodes{nd("localhost", 1), nd("h0.cluster.example", 2)},
			want: nodes{nd("localhost", 3)}, wantHosts: []string{""}},
		{name: "alias by resolution", listed: nodes{nd("login", 2), nd("h1", 2)},
			resolved: map[string][]netip.Addr{"login": addrs("10.9.0.5"), "h1": addrs("198.18.0.2")},
			want:     nodes{nd("login", 2), nd("h1", 2)}, wantHosts: []string{"", "h1"}},
	}
	for _, c := range cases {
		got, hosts := HostNodes(c.listed, h0, c.resolved)
		if !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(hosts, c.wantHosts) {
			t.Errorf("%s: got %v %q, want %v %q", c.name, got, hosts, c.want, c.wantHosts)
		}
	}
	if got, _ := HostNodes(nodes{nd("h1", 1)}, Self{}, nil); got[0] != nd("localhost", 0) {
		t.Errorf("no host name: node 0 is %v", got[0])
	}
}

func TestNetPick(t *testing.T) {
	cases := []struct {
		net, bound string
		hostAddrs  []string
		want       string
		err        string
	}{
		{bound: "198.18.0.1:5000", want: "198.18.0.1:5000"}, // concrete: as bound
		{bound: "127.0.0.1:5000", want: "127.0.0.1:5000"},
		{bound: "0.0.0.0:5000", want: "198.18.0.1:5000"},                                   // first non-loopback IPv4
		{bound: "0.0.0.0:5000", hostAddrs: []string{"10.9.0.5"}, want: "10.9.0.5:5000"},    // the host name's address first
		{bound: "0.0.0.0:5000", hostAddrs: []string{"127.0.1.1"}, want: "198.18.0.1:5000"}, // never a loopback one for it
		{bound: "[::]:5000", want: "198.18.0.1:5000"},
		{bound: "0.0.0.0:5000", net: "10.9.0.0/16", want: "10.9.0.5:5000"},
		{bound: "0.0.0.0:5000", net: "eth1", want: "10.9.0.5:5000"},
		{bound: "[::]:7", net: "fd00::/64", want: "[fd00::1]:7"},
		{bound: "0.0.0.0:7", net: "fd00::/64", err: "no address of this host"},    // 0.0.0.0 listens on IPv4 only
		{bound: "0.0.0.0:7", net: "192.0.2.0/24", err: "no address of this host"}, // eth9 is down
		{bound: "0.0.0.0:7", net: "lo", want: "127.0.0.1:7"},
	}
	for _, c := range cases {
		n, err := ParseNet(c.net)
		if err != nil {
			t.Fatalf("%q: %v", c.net, err)
		}
		got, err := PublicAddr(netip.MustParseAddrPort(c.bound), n, h0, addrs(c.hostAddrs...))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.net) {
				t.Errorf("%s --net %q: got %v, %v; want error %q", c.bound, c.net, got, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("%s --net %q: got %v, %v; want %s", c.bound, c.net, got, err, c.want)
		}
	}
}

func TestParseNet(t *testing.T) {
	n, err := ParseNet(" 198.18.0.7/24, eth0 ,fd00::/64")
	if err != nil || n.String() != "198.18.0.0/24,fd00::/64,eth0" {
		t.Fatalf("got %v, %v", n, err)
	}
	for _, bad := range []string{"198.18.0.0/33", "eth 0", "a/b"} {
		if _, err := ParseNet(bad); !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "neither a network") {
			t.Errorf("ParseNet(%q): %v", bad, err)
		}
	}
	if n, _ := ParseNet(""); !n.Any() {
		t.Error("empty --net is not Any")
	}
}

func TestFailureReport(t *testing.T) {
	ssh := []string{"ssh", "-F", "/x cfg"}
	cases := []struct {
		name string
		f    Failure
		want string
	}{
		{name: "bash command not found",
			f:    Failure{Node: "h2", Host: "h2", Agent: ssh, Status: proc.ExitStatus{ExitCode: 127}, Output: []string{"bash: line 1: dynrun: command not found"}},
			want: "the daemon of node h2 (host h2) exited before it registered (exited with code 127): bash: line 1: dynrun: command not found; give --prefix DIR (dynrun is DIR/bin/dynrun on every host) or put dynrun on the remote non-interactive PATH"},
		{name: "dash, prefix path missing",
			f:    Failure{Node: "h2", Host: "h2", Agent: ssh, Status: proc.ExitStatus{ExitCode: 127}, Output: []string{"sh: 1: /opt/dynrt/bin/dynrun: not found"}},
			want: "the daemon of node h2 (host h2) exited before it registered (exited with code 127): sh: 1: /opt/dynrt/bin/dynrun: not found; give --prefix DIR"},
		{name: "ssh auth",
			f:    Failure{Node: "n1", Host: "10.0.0.7", Agent: ssh, Status: proc.ExitStatus{ExitCode: 255}, Output: []string{"root@10.0.0.7: Permission denied (publickey)."}},
			want: "(exited with code 255): root@10.0.0.7: Permission denied (publickey).; ssh failed: check that `ssh -F '/x cfg' 10.0.0.7 true` works"},
		{name: "ssh host key",
			f:    Failure{Node: "n1", Host: "n1", Agent: ssh, Status: proc.ExitStatus{ExitCode: 255}, Output: []string{"Host key verification failed."}},
			want: "ssh failed: check that `ssh -F '/x cfg' n1 true`"},
		{name: "dropped by MaxStartups",
			f:    Failure{Node: "n9", Host: "n9", Agent: ssh, Status: proc.ExitStatus{ExitCode: 255}, Output: []string{"kex_exchange_identification: read: Connection reset by peer"}},
			want: "n9 dropped the connection during the handshake; if many hosts start at once this is sshd's MaxStartups"},
		{name: "loopback master",
			f:    Failure{Node: "n1", Host: "n1", Master: "127.0.0.1:4000", Agent: ssh, Status: proc.ExitStatus{ExitCode: 1}, Output: []string{"dynrun: daemon n1: connect to master at 127.0.0.1:4000: connection refused"}},
			want: "the master listens on 127.0.0.1:4000, which n1 cannot reach; start the DVM with --bind"},
		{name: "unreachable master",
			f:    Failure{Node: "n1", Host: "n1", Master: "10.1.1.1:4000", Agent: ssh, Status: proc.ExitStatus{ExitCode: 1}, Output: []string{"dynrun: daemon n1: connect to master at 10.1.1.1:4000: i/o timeout"}},
			want: "n1 cannot reach the master at 10.1.1.1:4000; choose the master's address with --bind or --net"},
		{name: "local daemon, no hint",
			f:    Failure{Node: "node1", Status: proc.ExitStatus{Signal: 9}},
			want: "the daemon of node node1 exited before it registered (killed by signal 9 (killed))"},
	}
	for _, c := range cases {
		got := c.f.String()
		if !strings.Contains(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	if h := (Failure{Node: "x", Agent: ssh, Status: proc.ExitStatus{ExitCode: 1}, Output: []string{"weird"}}).Hint(); h != "" {
		t.Errorf("hint for an unknown failure: %q", h)
	}
}

func TestTailBounded(t *testing.T) {
	tl := newTail(3, 5)
	for _, l := range []string{"a", "", "  ", "b", "c", "dddddddddd", "e\r"} {
		tl.add([]byte(l))
	}
	if got, want := tl.get(), []string{"c", "ddddd...", "e"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
