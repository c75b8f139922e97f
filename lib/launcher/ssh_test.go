package launcher

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The exact ssh argv is the contract with the remote host: one golden line
// per argument, the last one being the quoted remote command.
func TestSSHCommandGolden(t *testing.T) {
	spec := NodeSpec{Name: "n01", Host: "n01", Slots: 28, DVM: "abcd2345", Master: "10.0.0.1:40123", Token: "secret", Dir: "/tmp/x"}
	cases := []struct {
		name   string
		ssh    []string
		remote []string
		prefix string
		spec   NodeSpec
	}{
		{name: "default", spec: spec},
		// A remote path and a node name that need quoting.
		{name: "quoted", ssh: []string{"ssh", "-o", "BatchMode=yes", "-p", "2222"},
			remote: []string{"/opt/dyn rt/bin/dynrun", "daemon"},
			spec:   NodeSpec{Name: "it's $HOME", Host: "10.0.0.9", Slots: 2, Master: "[fe80::1]:7000"}},
		// --prefix: the daemon from DIR/bin, told DIR for its processes.
		{name: "prefix", ssh: []string{"ssh", "-F", "/etc/dyn ssh.cfg"}, prefix: "/opt/dynrt 1.0", spec: spec},
	}
	var b strings.Builder
	for _, c := range cases {
		s, err := New(Options{Kind: SSH, SSH: c.ssh, Remote: c.remote, Prefix: c.prefix})
		if err != nil {
			t.Fatal(err)
		}
		argv, err := SSHCommand(s.(*sshStarter).opts.SSH, s.(*sshStarter).remote(), c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		writeArgv(t, &b, c.name, argv)
	}
	checkGolden(t, "ssh.golden", b.String())
}

func TestSSHCommandRejects(t *testing.T) {
	base := NodeSpec{Name: "n1", Host: "n1", Slots: 1, Master: "10.0.0.1:1"}
	cases := []struct {
		name string
		mod  func(*NodeSpec)
		err  string
	}{
		{"unix master", func(s *NodeSpec) { s.Master = "/tmp/dynrt/x/master.sock" }, "not host:port"},
		{"option host", func(s *NodeSpec) { s.Host = "-oProxyCommand=sh" }, "starts with '-'"},
		{"no host", func(s *NodeSpec) { s.Host = "" }, "empty host name"},
		{"no slots", func(s *NodeSpec) { s.Slots = 0 }, "0 slots"},
	}
	for _, c := range cases {
		spec := base
		c.mod(&spec)
		_, err := SSHCommand([]string{"ssh"}, []string{"dynrun", "daemon"}, spec)
		if !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want error containing %q", c.name, err, c.err)
		}
	}
	// A loopback master is allowed (an ssh -R tunnel can make it
	// reachable); the daemon's failure report says to use --bind.
	spec := base
	spec.Master = "127.0.0.1:4000"
	if _, err := SSHCommand([]string{"ssh"}, []string{"dynrun"}, spec); err != nil {
		t.Errorf("ssh with loopback master: %v", err)
	}
}

func TestShellJoin(t *testing.T) {
	cases := map[string][]string{
		"a b":                   {"a", "b"},
		"'' x":                  {"", "x"},
		"'a b' 'it'\\''s' '$x'": {"a b", "it's", "$x"},
		"host:1 a=b /p/q_r-s.t": {"host:1", "a=b", "/p/q_r-s.t"},
		"'*' '~' 'a;b' '\n'":    {"*", "~", "a;b", "\n"},
	}
	for want, words := range cases {
		if got := ShellJoin(words); got != want {
			t.Errorf("ShellJoin(%q) = %q, want %q", words, got, want)
		}
	}
}

func TestJoinCommand(t *testing.T) {
	got := JoinCommand(NodeSpec{Name: "n2", Slots: 4, Master: "10.0.0.1:5000", DVM: "abc"})
	want := "DYNRT_TOKEN=<token> dynrun daemon --master 10.0.0.1:5000 --node n2 --slots 4 --dvm abc --join"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	got = JoinCommand(NodeSpec{Name: "n2", Slots: 4, Master: "10.0.0.1:5000", Token: "ab cd"})
	want = "DYNRT_TOKEN='ab cd' dynrun daemon --master 10.0.0.1:5000 --node n2 --slots 4 --join"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

// writeArgv appends argv to b, one argument a line under "# name", and
// fails if the token "secret" shows in it (it must never be in an argv).
func writeArgv(t *testing.T, b *strings.Builder, name string, argv []string) {
	t.Helper()
	if strings.Contains(strings.Join(argv, " "), "secret") {
		t.Fatalf("%s: token in argv: %q", name, argv)
	}
	b.WriteString("# " + name + "\n")
	for _, a := range argv {
		b.WriteString(a + "\n")
	}
}

// checkGolden compares got with testdata/name (rewritten with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("argv differs from %s (run with -update if intended):\n%s", golden, got)
	}
}
