package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/launcher"
)

// fakeHosts stands in for ssh and remote hosts: a script that logs its
// argv, skips ssh's options, takes the host and runs the remote command
// here with `sh -c`, as ssh hands it to the remote user's shell. Each fake
// host has a rendezvous directory of its own (root/<host>, not created:
// a remote host need not have one) and a PATH without dynrun (/usr/bin:/bin,
// a typical non-interactive PATH). The script lives in a directory with
// a space so that the agent needs quoting.
type fakeHosts struct {
	root  string
	agent string // --launch-agent value
	log   string // one line per ssh call: its argv joined by spaces
}

func newFakeHosts(t *testing.T, body string) *fakeHosts {
	t.Helper()
	root := t.TempDir()
	sshDir := filepath.Join(root, "fake ssh")
	if err := os.Mkdir(sshDir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &fakeHosts{root: root, log: filepath.Join(root, "ssh.log")}
	if body == "" {
		body = `DYNRT_DIR='` + root + `/'$host; export DYNRT_DIR
PATH=/usr/bin:/bin; export PATH
exec sh -c "$*"`
	}
	script := `#!/bin/sh
printf '%s\n' "$*" >> '` + f.log + `'
while [ $# -gt 0 ]; do
	case "$1" in
	-[oFpilJ]) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
host=$1
shift
` + body + "\n"
	path := filepath.Join(sshDir, "ssh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	f.agent = launcher.ShellJoin([]string{path}) + " -o BatchMode=yes"
	return f
}

func (f *fakeHosts) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// hostDir is the rendezvous directory of fake host h.
func (f *fakeHosts) hostDir(h string) string { return filepath.Join(f.root, h) }

// prefixDir makes DIR with DIR/bin/dynrun (the dynrun under test) for
// --prefix.
func prefixDir(t *testing.T) string {
	t.Helper()
	pfx := filepath.Join(t.TempDir(), "dynrt")
	if err := os.MkdirAll(filepath.Join(pfx, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(pfx, "bin", "dynrun")); err != nil {
		t.Fatal(err)
	}
	return pfx
}

// A job on a private DVM over two (fake) ssh hosts with --prefix: the
// daemons run as DIR/bin/dynrun through the launch agent (quoted, with its
// options), the processes have DIR/bin and DIR/lib first in PATH and
// LD_LIBRARY_PATH, none runs on the master's host (not listed: 0 slots),
// and no host keeps a directory afterwards.
func TestSSHPrefixRunsJobOnHosts(t *testing.T) {
	dynDir(t)
	f := newFakeHosts(t, "")
	pfx := prefixDir(t)
	code, out, errOut := runBin(t, "-n", "3", "--host", "fh1:1,fh2:2", "--launch-agent", f.agent, "--prefix", pfx,
		"--bind", "127.0.0.1:0", "sh", "-c", `echo "$DYNRT_NODE|$PATH|$LD_LIBRARY_PATH"`)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var nodes []string
	for _, l := range lines {
		parts := strings.Split(l, "|")
		if len(parts) != 3 {
			t.Fatalf("output line %q", l)
		}
		nodes = append(nodes, parts[0])
		if !strings.HasPrefix(parts[1], pfx+"/bin:") || !strings.HasPrefix(parts[2], pfx+"/lib") {
			t.Errorf("%s: PATH %q, LD_LIBRARY_PATH %q: want %s/bin and %s/lib first", parts[0], parts[1], parts[2], pfx, pfx)
		}
	}
	slices.Sort(nodes)
	if want := []string{"fh1", "fh2", "fh2"}; !slices.Equal(nodes, want) {
		t.Errorf("processes ran on %q, want %q (nothing on the master's host)", nodes, want)
	}
	calls := f.calls(t)
	if len(calls) != 2 {
		t.Fatalf("ssh calls: %q", calls)
	}
	for _, c := range calls {
		if !strings.HasPrefix(c, "-o BatchMode=yes fh") || !strings.Contains(c, " "+pfx+"/bin/dynrun daemon --prefix "+pfx+" ") {
			t.Errorf("ssh call %q: want the agent's options, the host and %s/bin/dynrun daemon --prefix", c, pfx)
		}
	}
	for _, h := range []string{"fh1", "fh2"} {
		if _, err := os.Stat(f.hostDir(h)); !os.IsNotExist(err) {
			t.Errorf("host %s keeps its rendezvous directory after the run: %v", h, listDir(f.hostDir(h)))
		}
	}
}

func listDir(dir string) []string {
	var out []string
	_ = filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error {
		out = append(out, p)
		return nil
	})
	return out
}

// A daemonized DVM over fake ssh hosts: `dvm status` shows the master's
// host as node 0 with 0 slots, and `dvm stop` leaves no directory on the
// hosts (before the fix, each kept <dir>/<dvm id>/).
func TestSSHDVMStopLeavesNothing(t *testing.T) {
	dynDir(t)
	f := newFakeHosts(t, "")
	pfx := prefixDir(t)
	t.Setenv(envSSH, f.agent) // the variable form of --launch-agent
	t.Setenv(envPrefix, pfx)
	id := startDVM(t, "--host", "fh1:2,fh2:2", "--bind", "127.0.0.1:0")
	code, out, errOut := runBin(t, "dvm", "status", "--dvm", id)
	if code != 0 {
		t.Fatalf("status: %d %s %s", code, out, errOut)
	}
	host, _ := os.Hostname()
	for _, want := range []*statusLine{{host, "0"}, {"fh1", "2"}, {"fh2", "2"}} {
		if !want.in(out) {
			t.Errorf("status lacks node %s with %s slots:\n%s", want.node, want.slots, out)
		}
	}
	if code, out, errOut := runBin(t, "--dvm", id, "-n", "4", "sh", "-c", `echo "$DYNRT_NODE"`); code != 0 || strings.Contains(out, host) {
		t.Errorf("job: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := runBin(t, "dvm", "stop", "--dvm", id); code != 0 {
		t.Fatalf("stop: %d %s", code, errOut)
	}
	for _, h := range []string{"fh1", "fh2"} {
		if _, err := os.Stat(f.hostDir(h)); !os.IsNotExist(err) {
			t.Errorf("host %s keeps %v after dvm stop", h, listDir(f.hostDir(h)))
		}
	}
}

type statusLine struct{ node, slots string }

// in finds the status line of the node with used/slots 0/slots.
func (r *statusLine) in(out string) bool {
	for _, l := range strings.Split(out, "\n") {
		if fs := strings.Fields(l); len(fs) > 2 && fs[0] == r.node && fs[2] == "0/"+r.slots {
			return true
		}
	}
	return false
}

// A daemon that cannot start is reported with its node, its host, what
// the remote side printed and what to do; today's message said only
// "the daemon of node h2 exited before it registered".
func TestSSHDaemonFailureReport(t *testing.T) {
	cases := []struct {
		name string
		body string   // fake ssh after the host is parsed ("" = run the command)
		args []string // extra dynrun flags
		want []string
	}{
		{name: "dynrun not on the remote PATH", want: []string{
			"the daemon of node fh1 (host fh1) exited before it registered (exited with code 127)",
			"dynrun: not found",
			"give --prefix DIR",
		}},
		{name: "wrong prefix", args: []string{"--prefix", "/nonexistent/dynrt"}, want: []string{
			"(host fh1) exited before it registered",
			"/nonexistent/dynrt/bin/dynrun: not found",
			"give --prefix DIR",
		}},
		{name: "ssh refused", body: `echo "$host: Permission denied (publickey)." >&2; exit 255`, want: []string{
			"the daemon of node fh1 (host fh1) exited before it registered (exited with code 255): fh1: Permission denied (publickey).",
			"ssh failed: check that `",
			" -o BatchMode=yes fh1 true` works",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dynDir(t)
			f := newFakeHosts(t, c.body)
			args := append([]string{"dvm", "start", "--host", "fh1:1", "--launch-agent", f.agent, "--bind", "127.0.0.1:0"}, c.args...)
			code, out, errOut := runBin(t, args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout %s\nstderr %s", code, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if !strings.Contains(errOut, f.agent[:strings.Index(f.agent, " -o")]) && c.body != "" {
				t.Errorf("the report does not name the ssh command %s:\n%s", f.agent, errOut)
			}
		})
	}
}

// Bad quoting in the launch agent is a usage error naming where it came
// from.
func TestLaunchAgentQuoting(t *testing.T) {
	dynDir(t)
	code, _, errOut := runBin(t, "dvm", "start", "--host", "fh1", "--launch-agent", "ssh -F 'x")
	if code != 2 || !strings.Contains(errOut, "--launch-agent: ") || !strings.Contains(errOut, "never closed") {
		t.Errorf("--launch-agent: exit %d, %s", code, errOut)
	}
	t.Setenv(envSSH, `ssh "`)
	code, _, errOut = runBin(t, "-n", "1", "--host", "fh1", "true")
	if code != 2 || !strings.Contains(errOut, "$DYNRT_SSH: ") {
		t.Errorf("$DYNRT_SSH: exit %d, %s", code, errOut)
	}
	t.Setenv(envSSH, "")
	code, _, errOut = runBin(t, "-n", "1", "--host", "fh1", "--launcher", "join", "true")
	if code != 2 || !strings.Contains(errOut, "dvm start --launcher join") {
		t.Errorf("launch form with the join launcher: exit %d, %s", code, errOut)
	}
	code, _, errOut = runBin(t, "-n", "1", "--host", "fh1", "--launcher", "local", "true")
	if code != 2 || !strings.Contains(errOut, "--launcher local starts daemons on this host only") {
		t.Errorf("local launcher with remote hosts: exit %d, %s", code, errOut)
	}
}

// Tools inside a rank on another host work without the submitter's
// rendezvous directory: processes there get DYNRT_DVM=uri:tcp://<master>
// (with DYNRT_TOKEN), their host's DYNRT_DIR instead of the submitter's,
// and DYNRT_NODE_ADDR from the DVM's --net. The master, bound to the
// wildcard address (the ssh default), publishes a concrete address from
// --net (lo here: the test's traffic stays on loopback), never 0.0.0.0.
func TestSSHToolsInRanksAndAddresses(t *testing.T) {
	dir := dynDir(t)
	f := newFakeHosts(t, "")
	pfx := prefixDir(t)
	report := filepath.Join(t.TempDir(), "uri")
	code, out, errOut := runBin(t, "dvm", "start", "--daemonize", "--host", "fh1:1,fh2:1", "--launch-agent", f.agent,
		"--prefix", pfx, "--net", "lo", "--report-uri", report)
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("dvm start: exit %d, %q %q", code, out, errOut)
	}
	t.Cleanup(func() { runBin(t, "dvm", "stop", "--dvm", id) })
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	uri := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "uri:tcp://") {
			uri = l
		}
	}
	if !strings.HasPrefix(uri, "uri:tcp://127.0.0.1:") {
		t.Fatalf("published TCP address %q (report %q): want 127.0.0.1 (--net lo), never 0.0.0.0", uri, b)
	}
	// Each rank prints what it got, then asks the DVM for its status with
	// the dynrun it finds on its PATH (DIR/bin first).
	code, out, errOut = runBin(t, "--dvm", id, "-n", "2", "--map-by", "node", "sh", "-c",
		`echo "env|$DYNRT_NODE|$DYNRT_DVM|$DYNRT_DIR|$DYNRT_NODE_ADDR"; dynrun dvm status | grep -c '^fh[12] '`)
	if code != 0 {
		t.Fatalf("job: exit %d\n%s\n%s", code, out, errOut)
	}
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "env|") {
			if l != "2" {
				t.Errorf("dvm status inside a rank listed %s nodes fh1/fh2, want 2 (output %q)", l, out)
			}
			continue
		}
		p := strings.Split(l, "|")
		seen++
		if p[2] != uri {
			t.Errorf("%s: DYNRT_DVM=%q, want %q", p[1], p[2], uri)
		}
		if p[3] != f.hostDir(p[1]) || p[3] == dir {
			t.Errorf("%s: DYNRT_DIR=%q, want its host's %q (not the submitter's %q)", p[1], p[3], f.hostDir(p[1]), dir)
		}
		if p[4] != "127.0.0.1" {
			t.Errorf("%s: DYNRT_NODE_ADDR=%q, want 127.0.0.1 (--net lo)", p[1], p[4])
		}
	}
	if seen != 2 {
		t.Errorf("output %q", out)
	}
}
