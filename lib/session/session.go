// Package session is the application library of dynrt (DESIGN §2, §6;
// the MPI Sessions ideas of seed 001): a process launched by dynrun opens a
// Session to its node daemon and through it learns who it is, queries
// process sets, exchanges key-value data with other processes, fences,
// publishes and looks up names, constructs groups with DVM-wide unique
// context ids, subscribes to runtime events and aborts its job.
//
// A process may open several sessions (Init more than once); each has its
// own connection to the daemon and its own state, and every method of a
// Session is safe for concurrent use. Data put and committed by any of a
// process's sessions belongs to the process (its job and rank).
//
// Errors carry the wire codes: errors.Is(err, wire.ErrNotFound),
// wire.ErrTimeout, wire.ErrAborted (a fence or group whose participant
// ended), wire.ErrExists, ...
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/wire"
)

// ErrNoRuntime is wrapped by the error of Init when the process was not
// started by dynrun (its DYNRT_* environment is missing).
var ErrNoRuntime = errors.New("the process was not started by dynrun")

// errFinalized is returned by calls on a finalized session.
var errFinalized = wire.Errorf(wire.ErrState, "session: the session is finalized")

// Session is an open session of this process with the runtime.
type Session struct {
	conn *wire.Conn
	info wire.SessionInfo
	log  *slog.Logger

	mu     sync.Mutex
	staged map[string][]byte // Put, not yet committed
	psets  []string          // names as of the last NumPsets
	subs   map[uint64]*subscription
	closed bool

	events *eventQueue
	rc     rcSession // accept calls of resource changes (rc.go)
}

type config struct {
	env    func(string) string
	logger *slog.Logger
	dial   func(ctx context.Context, addr string) (net.Conn, error)
	pid    int
}

// Option configures Init.
type Option func(*config)

// WithEnv makes Init read the environment through env instead of
// os.Getenv.
func WithEnv(env func(string) string) Option { return func(c *config) { c.env = env } }

// WithLogger sets where the session logs protocol trouble (default:
// discarded).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// connectAttempts bounds Init's tries to reach the daemon when it closes
// the handshake or lets it time out (a daemon starved of CPU).
const connectAttempts = 3

// WithDialer makes Init reach the daemon through dial (given
// $DYNRT_DAEMON) instead of its unix socket: the simulated processes of
// lib/simnode dial in memory.
func WithDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(c *config) { c.dial = dial }
}

// WithPID makes the session claim pid instead of os.Getpid() (a
// simulated process's pid). The daemon checks the claim against the
// connection's credentials where it has them (a unix socket).
func WithPID(pid int) Option { return func(c *config) { c.pid = pid } }

// Init opens a session: it connects to the node daemon named by
// $DYNRT_DAEMON as process $DYNRT_RANK of job $DYNRT_JOB and fetches the
// process's identity.
func Init(ctx context.Context, opts ...Option) (*Session, error) {
	cfg := config{env: os.Getenv, pid: os.Getpid()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	get := func(name string) (string, error) {
		v := cfg.env(name)
		if v == "" {
			return "", wire.Errorf(wire.ErrInvalid, "session: %s is not set: %w", name, ErrNoRuntime)
		}
		return v, nil
	}
	sock, err := get(procenv.Daemon)
	if err != nil {
		return nil, err
	}
	job, err := get(procenv.Job)
	if err != nil {
		return nil, err
	}
	rs, err := get(procenv.Rank)
	if err != nil {
		return nil, err
	}
	rank, err := strconv.ParseUint(rs, 10, 32)
	if err != nil {
		return nil, wire.Errorf(wire.ErrInvalid, "session: %s=%q is not a rank", procenv.Rank, rs)
	}
	s := &Session{log: cfg.logger, staged: map[string][]byte{}, subs: map[uint64]*subscription{}}
	s.events = newEventQueue(s.dispatch)
	hello := wire.Hello{
		Role: wire.RoleClient, Name: procenv.ClientName(job, uint32(rank)), Token: cfg.env(procenv.Token), PID: cfg.pid,
	}
	// When the daemon's connection ends the event goroutine ends too, once
	// it has delivered what arrived: a process that outlives its daemon
	// (or a simulated one, lib/simnode) keeps nothing running.
	wopts := wire.Options{OnEvent: s.onEvent, Logger: cfg.logger, OnClose: func(*wire.Conn, error) { s.events.drain() }}
	dial := func() (*wire.Conn, error) {
		if cfg.dial != nil {
			nc, err := cfg.dial(ctx, sock)
			if err != nil {
				return nil, err
			}
			return wire.Client(ctx, nc, hello, wopts)
		}
		return wire.Dial(ctx, "unix", sock, hello, wopts)
	}
	// A daemon too busy to read the hello within its timeout closes the
	// connection: the process would fail its start for the daemon's load.
	// It tries again, a few times; a refusal (an answer) is final.
	var conn *wire.Conn
	for attempt := 1; ; attempt++ {
		conn, err = dial()
		code := wire.CodeOf(err)
		if err == nil || attempt == connectAttempts || ctx.Err() != nil || (code != wire.CodeClosed && code != wire.CodeTimeout) {
			break
		}
		cfg.logger.Debug("session: the daemon closed the handshake; trying again", "daemon", sock, "attempt", attempt, "err", err)
		select {
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if err != nil {
		s.events.close()
		return nil, fmt.Errorf("session: connect to the daemon at %s: %w", sock, err)
	}
	s.conn = conn
	if err := conn.Call(ctx, wire.KindSessionInit, &wire.SessionInitReq{Job: job, Rank: uint32(rank), PID: cfg.pid}, &s.info); err != nil {
		conn.Close()
		s.events.close()
		return nil, fmt.Errorf("session: init: %w", err)
	}
	return s, nil
}

// Finalize closes the session. Later calls fail; other sessions of the
// process are not affected.
func (s *Session) Finalize(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errFinalized
	}
	s.closed = true
	s.mu.Unlock()
	err := s.conn.Call(ctx, wire.KindSessionFinalize, &wire.SessionFinReq{Job: s.info.Job, Rank: s.info.Rank}, nil)
	s.conn.Close()
	s.events.close()
	if err != nil {
		return fmt.Errorf("session: finalize: %w", err)
	}
	return nil
}

// call makes a request to the daemon.
func (s *Session) call(ctx context.Context, kind string, req, resp any) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errFinalized
	}
	if err := s.conn.Call(ctx, kind, req, resp); err != nil {
		return fmt.Errorf("session: %s: %w", kind, err)
	}
	return nil
}

// Identity.

// Job returns the job namespace.
func (s *Session) Job() string { return s.info.Job }

// App returns the application name (the set mpi://app/<app> holds every
// process of the job).
func (s *Session) App() string { return s.info.App }

// Rank returns the process's rank in its job.
func (s *Session) Rank() uint32 { return s.info.Rank }

// UID returns the process's 64-bit id: job number << 32 | rank.
func (s *Session) UID() uint64 { return s.info.UID }

// Node returns the name of the node the process runs on.
func (s *Session) Node() string { return s.info.Node }

// DVM returns the id of the DVM.
func (s *Session) DVM() string { return s.info.DVM }

// Size returns the number of processes of the job when the session was
// opened. During a change in flight that is the job before the change,
// except for the change's own new processes (docs/session.md, Identity).
func (s *Session) Size() int { return int(s.info.Size) }

// LocalRank returns the process's index among its job's processes on its
// node.
func (s *Session) LocalRank() int { return int(s.info.LocalRank) }

// LocalPeers returns the ranks of the job on this node, this one included.
func (s *Session) LocalPeers() []uint32 { return s.info.LocalPeers.Ranks() }

// Info returns everything the daemon said at Init.
func (s *Session) Info() wire.SessionInfo {
	in := s.info
	in.LocalPeers = slices.Clone(in.LocalPeers)
	return in
}

// Abort asks the runtime to kill the caller's job and to make it end with
// status code (dynrun then exits with it); msg is shown to the user. It
// returns once the runtime has accepted; the process is killed soon after.
func (s *Session) Abort(ctx context.Context, code int, msg string) error {
	return s.call(ctx, wire.KindSessionAbort, &wire.AbortReq{Status: code, Msg: msg}, nil)
}

// timeoutMS converts the time left before ctx's deadline, bounded by an
// explicit timeout (0 = none), to the ms of a request (0 = no limit).
func timeoutMS(ctx context.Context, timeout time.Duration) int64 {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); timeout <= 0 || left < timeout {
			timeout = left
		}
	}
	if timeout <= 0 {
		if _, ok := ctx.Deadline(); ok {
			return 1 // already expired: let the far side say so
		}
		return 0
	}
	return max(timeout.Milliseconds(), 1)
}
