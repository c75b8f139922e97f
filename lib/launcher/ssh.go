package launcher

import (
	"context"
	"net"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

type sshStarter struct{ opts Options }

func (sshStarter) Kind() string { return SSH }

func (s *sshStarter) Start(ctx context.Context, spec NodeSpec) (*Daemon, error) {
	argv, err := SSHCommand(s.opts.SSH, s.remote(), spec)
	if err != nil {
		return nil, err
	}
	// The token travels on ssh's stdin: argv is visible to every user of
	// both hosts (ps), stdin is not.
	d, err := start(ctx, s.opts, spec.Name, argv, s.opts.Env, spec.Token+"\n")
	if d != nil {
		d.Host, d.Agent, d.Master = spec.Host, s.opts.SSH, spec.Master
	}
	return d, err
}

// remote is the remote command before the daemon's flags.
func (s *sshStarter) remote() []string {
	if s.opts.Prefix == "" {
		return s.opts.Remote
	}
	return append(append([]string(nil), s.opts.Remote...), FlagPrefix, s.opts.Prefix)
}

// SSHCommand builds the local argv that starts the daemon of spec on
// spec.Host: sshArgv, the host, then the remote command as ONE argument,
// quoted for the remote shell (ssh joins its arguments with spaces and hands
// the result to the remote user's shell, so unquoted words would be split
// and expanded there).
//
// The master address must be TCP and reachable from the host: a unix
// socket path or a loopback address only works for the host itself.
func SSHCommand(sshArgv, remote []string, spec NodeSpec) ([]string, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if err := CheckHost(spec.Host); err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: ssh: node %s: %w", spec.Name, err)
	}
	// A loopback master address is allowed: an ssh tunnel (-R) can make it
	// reachable. Without one the daemon cannot connect, and its report
	// (Failure.Hint) says to give --bind.
	if _, _, err := net.SplitHostPort(spec.Master); err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: ssh: master address %q is not host:port; remote daemons need the master's TCP address", spec.Master)
	}
	cmd := append(append([]string(nil), remote...), DaemonFlags(spec, true)...)
	argv := append(append([]string(nil), sshArgv...), spec.Host, ShellJoin(cmd))
	return argv, nil
}

// ShellJoin quotes words for a POSIX shell and joins them with spaces.
// Words made only of safe characters stay as they are; others are put in
// single quotes, with each quote written as quote, backslash, quote, quote.
func ShellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	safe := true
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@%+=:,./_-", c)) {
			safe = false
			break
		}
	}
	if safe {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
