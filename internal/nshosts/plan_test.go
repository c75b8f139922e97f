package nshosts

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestNewPlan(t *testing.T) {
	cases := []struct {
		name   string
		prefix string
		hosts  []string
		subnet int
		want   []string // name netns addr port, one per host
		err    string
	}{
		{name: "three hosts", prefix: "dyn-t", hosts: DefaultHosts(3), subnet: 0,
			want: []string{"h0 dyn-t-h0 198.18.0.1 v0", "h1 dyn-t-h1 198.18.0.2 v1", "h2 dyn-t-h2 198.18.0.3 v2"}},
		{name: "second half of the /15", prefix: "p", hosts: []string{"a", "node-7"}, subnet: 300,
			want: []string{"a p-a 198.19.44.1 v0", "node-7 p-node-7 198.19.44.2 v1"}},
		{name: "last subnet", prefix: "p", hosts: []string{"x"}, subnet: Subnets - 1, want: []string{"x p-x 198.19.255.1 v0"}},
		{name: "subnet out of range", prefix: "p", hosts: []string{"x"}, subnet: Subnets, err: "subnet index 512 out of [0, 512)"},
		{name: "negative subnet", prefix: "p", hosts: []string{"x"}, subnet: -1, err: "subnet index -1"},
		{name: "no hosts", prefix: "p", err: "no hosts"},
		{name: "too many hosts", prefix: "p", hosts: DefaultHosts(MaxHosts + 1), err: "251 hosts, at most 250"},
		{name: "duplicate host", prefix: "p", hosts: []string{"a", "b", "a"}, err: `host "a" named twice`},
		{name: "bridge name", prefix: "p", hosts: []string{"br"}, err: `host name "br" is taken by the bridge`},
		{name: "uppercase host", prefix: "p", hosts: []string{"H0"}, err: `host name "H0": character 'H'`},
		{name: "dot in host", prefix: "p", hosts: []string{"a.b"}, err: `character '.'`},
		{name: "empty prefix", prefix: "", hosts: []string{"a"}, err: "empty prefix"},
		{name: "slash in prefix", prefix: "a/b", hosts: []string{"a"}, err: `prefix "a/b": character '/'`},
		{name: "dash at start", prefix: "-p", hosts: []string{"a"}, err: "starts or ends with '-'"},
		{name: "long prefix", prefix: strings.Repeat("p", 41), hosts: []string{"a"}, err: "longer than 40"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPlan(c.prefix, c.hosts, c.subnet)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want error containing %q", p, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range p.Hosts {
				got = append(got, strings.Join([]string{h.Name, h.NetNS, h.Addr.String(), h.PortIf}, " "))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("hosts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if p.Bridge != c.prefix+"-br" {
				t.Errorf("bridge namespace %q", p.Bridge)
			}
			if !p.Network().Contains(p.Hosts[0].Addr) || p.Network().Bits() != 24 {
				t.Errorf("network %s does not hold %s", p.Network(), p.Hosts[0].Addr)
			}
		})
	}
}

// Every subnet index gives a distinct /24 inside 198.18.0.0/15.
func TestPrefixesDistinct(t *testing.T) {
	seen := map[string]bool{}
	for n := range Subnets {
		p := Prefix(n)
		a := p.Addr().As4()
		if a[0] != 198 || a[1] != 18 && a[1] != 19 || a[3] != 0 {
			t.Fatalf("subnet %d: %s outside 198.18.0.0/15", n, p)
		}
		if seen[p.String()] {
			t.Fatalf("subnet %d: %s given twice", n, p)
		}
		seen[p.String()] = true
	}
	if f := FirstSubnet("dyn-nshosts"); f < 0 || f >= Subnets || f != FirstSubnet("dyn-nshosts") {
		t.Fatalf("FirstSubnet = %d", f)
	}
}

func TestRenderGolden(t *testing.T) {
	p, err := NewPlan("dyn-t", DefaultHosts(3), 5)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFiles("/tmp/dynrt-nshosts-dyn-t-1")
	files := map[string]string{
		"hosts.golden":       RenderHosts(p),
		"ssh_config.golden":  RenderSSHConfig(f, p),
		"sshd_config.golden": RenderSSHDConfig(f, p.Hosts[1], SessionEnv(f, "h1", []string{"PATH=/opt/dyn bin:/usr/bin"})),
	}
	for name, got := range files {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs:\n%s\nwant:\n%s", name, got, want)
		}
	}
}

func TestSessionEnv(t *testing.T) {
	f := NewFiles("/c")
	cases := []struct {
		name string
		env  []string
		want string
	}{
		{name: "defaults", want: "DYNRT_DIR=/c/h1/run HOME=/c/home"},
		{name: "extra", env: []string{"PATH=/x:/usr/bin", "A=b c"}, want: "DYNRT_DIR=/c/h1/run HOME=/c/home PATH=/x:/usr/bin A=b c"},
		{name: "own HOME", env: []string{"HOME=/root"}, want: "DYNRT_DIR=/c/h1/run HOME=/root"},
		{name: "HOMEDIR is not HOME", env: []string{"HOMEDIR=/x"}, want: "DYNRT_DIR=/c/h1/run HOME=/c/home HOMEDIR=/x"},
	}
	for _, c := range cases {
		if got := strings.Join(SessionEnv(f, "h1", c.env), " "); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
