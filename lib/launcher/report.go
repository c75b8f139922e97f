package launcher

import (
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/dynrt/dynrt/lib/proc"
)

// The output a daemon's process (the daemon, or the ssh client running it)
// leaves for its error report: the last tailLines lines, each cut to
// tailBytes. Bounded, because a daemon that runs for days prints what it
// likes.
const (
	tailLines = 8
	tailBytes = 400
)

// tail keeps the last lines written to it.
type tail struct {
	mu    sync.Mutex
	lines []string
	next  int // ring position once full
	max   int
	cut   int
}

func newTail(lines, bytes int) *tail { return &tail{max: lines, cut: bytes} }

func (t *tail) add(line []byte) {
	if len(line) > t.cut {
		line = append(line[:t.cut:t.cut], "..."...)
	}
	s := strings.TrimRight(string(line), "\r")
	if strings.TrimSpace(s) == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) < t.max {
		t.lines = append(t.lines, s)
		return
	}
	t.lines[t.next] = s
	t.next = (t.next + 1) % t.max
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(append([]string(nil), t.lines[t.next:]...), t.lines[:t.next]...)
}

// Output returns the last lines the process printed (stdout and stderr,
// interleaved as read), oldest first.
func (d *Daemon) Output() []string {
	if d.tail == nil {
		return nil
	}
	return d.tail.get()
}

// Failure describes a daemon whose process ended before the daemon
// registered with the master: which node and host, how the process ended,
// the last lines it printed; its String says what the user can do about
// it. Call it after Done is closed.
func (d *Daemon) Failure() Failure {
	return Failure{Node: d.Node, Host: d.Host, Master: d.Master, Agent: d.Agent, Status: d.Wait(), Output: d.Output()}
}

// Failure is a daemon that did not come up, for its report.
type Failure struct {
	Node, Host string
	Master     string   // the address the daemon was to dial
	Agent      []string // the ssh command; nil for a local daemon
	Status     proc.ExitStatus
	Output     []string // its last lines
}

// String reads "the daemon of node N (host H) exited before it registered
// (exited with code 127): <output>; <hint>".
func (f Failure) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the daemon of node %s", f.Node)
	if f.Host != "" {
		fmt.Fprintf(&b, " (host %s)", f.Host)
	}
	fmt.Fprintf(&b, " exited before it registered (%s)", f.Status)
	if len(f.Output) > 0 {
		b.WriteString(": " + strings.Join(f.Output, " | "))
	}
	if h := f.Hint(); h != "" {
		b.WriteString("; " + h)
	}
	return b.String()
}

// Hint says what to do about the failure, from what the process printed;
// "" when nothing specific is known.
func (f Failure) Hint() string {
	text := strings.ToLower(strings.Join(f.Output, "\n"))
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(text, s) {
				return true
			}
		}
		return false
	}
	remote := f.Agent != nil
	switch {
	case strings.Contains(text, "dynrun") && has("command not found", "not found", "no such file or directory"),
		remote && f.Status.Code() == 127:
		return "give --prefix DIR (dynrun is DIR/bin/dynrun on every host) or put dynrun on the remote non-interactive PATH"
	case remote && has("connect to master") && isLoopback(f.Master):
		return fmt.Sprintf("the master listens on %s, which %s cannot reach; start the DVM with --bind ADDR (or --net) reachable from the hosts", f.Master, f.Host)
	case remote && has("connect to master"):
		return fmt.Sprintf("%s cannot reach the master at %s; choose the master's address with --bind or --net", f.Host, f.Master)
	case !remote:
		return ""
	case has("kex_exchange_identification", "connection reset by peer"):
		return fmt.Sprintf("ssh failed: %s dropped the connection during the handshake; if many hosts start at once this is sshd's MaxStartups (dynrun opens at most 8 connections at once; other clients may take the rest: raise MaxStartups or retry); check that `%s %s true` works", f.Host, ShellJoin(f.Agent), f.Host)
	case has("permission denied", "host key verification failed", "could not resolve hostname",
		"connection refused", "connection timed out", "no route to host", "connection closed", "kex_exchange",
		"too many authentication failures", "bad configuration option", "no such file", "can't open user config"),
		f.Status.Code() == 255:
		return fmt.Sprintf("ssh failed: check that `%s %s true` works without a password or prompt (the ssh command is --launch-agent or $DYNRT_SSH)", ShellJoin(f.Agent), f.Host)
	}
	return ""
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
