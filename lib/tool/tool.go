// Package tool attaches a tool (dynrun, dynrc, dynpset, dyntop) to the
// master of a running DVM and wraps the requests tools make.
//
// Attach finds the DVM through the rendezvous directory (lib/dvmdir:
// --dvm id|name|file:PATH|uri:ADDR, then $DYNRT_DVM, then the only live
// DVM), dials the master's unix socket (or its TCP address with the token
// when there is no socket) and says hello as role "tool".
//
// Events pushed by the master (subscriptions and the output of jobs this
// client launched) are delivered to callbacks on the connection's reader
// goroutine, in arrival order: callbacks must return quickly and must not
// make calls on the same Client.
package tool

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/wire"
)

// Options say which DVM to attach to and how.
type Options struct {
	Sel    string              // the --dvm value ("" = $DYNRT_DVM, then the only live DVM)
	Dir    string              // rendezvous directory; "" = dvmdir.Path(Env)
	Env    func(string) string // environment lookups; nil = os.Getenv
	Name   string              // name sent in the hello (e.g. "dynrun"); "" = "tool"
	Logger *slog.Logger
}

// Client is an attached tool. Its methods are safe for concurrent use.
type Client struct {
	conn *wire.Conn
	info dvmdir.Info
	log  *slog.Logger

	mu       sync.Mutex
	subs     []*subscription
	onOutput func(wire.OutputLine)
}

type subscription struct {
	id    uint64
	kinds []string
	job   string
	fn    func(wire.Event)
}

func (s *subscription) match(ev *wire.Event) bool {
	if s.job != "" && ev.Job != s.job {
		return false
	}
	if len(s.kinds) == 0 {
		return true
	}
	for _, k := range s.kinds {
		if strings.HasPrefix(ev.Kind, k) {
			return true
		}
	}
	return false
}

// Attach resolves the DVM selected by opts and connects to its master.
func Attach(ctx context.Context, opts Options) (*Client, error) {
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = dvmdir.Path(opts.Env); err != nil {
			return nil, err
		}
	}
	info, err := dvmdir.Resolve(dir, opts.Sel, opts.Env)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, info, opts)
}

// Dial connects to the master described by info (for callers that already
// have it, like a dynrun running its own private DVM). Only opts.Name and
// opts.Logger are used.
func Dial(ctx context.Context, info dvmdir.Info, opts Options) (*Client, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	name := opts.Name
	if name == "" {
		name = "tool"
	}
	c := &Client{info: info, log: opts.Logger}
	network, addr := "unix", info.Socket
	if addr == "" {
		network, addr = "tcp", info.TCP
	}
	if addr == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "tool: DVM %s has no master address", info.ID)
	}
	conn, err := wire.Dial(ctx, network, addr, wire.Hello{Role: wire.RoleTool, Name: name, Token: info.Token},
		wire.Options{OnEvent: c.onEvent, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	c.conn = conn
	if c.info.ID == "" {
		c.info.ID = conn.Peer().Name // the master names itself by DVM id
	}
	return c, nil
}

// Info returns what the rendezvous file said about the DVM (for a uri:
// selection, only the address and the id from the master's hello).
func (c *Client) Info() dvmdir.Info { return c.info }

// Conn returns the connection, for requests this package does not wrap.
func (c *Client) Conn() *wire.Conn { return c.conn }

// Close disconnects. Jobs this client launched are killed by the master
// when their launcher goes away.
func (c *Client) Close() error { return c.conn.Close() }

// Done is closed when the connection to the master is gone.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

func (c *Client) onEvent(req *wire.Request) {
	switch req.Kind {
	case wire.KindEvent:
		var ev wire.Event
		if err := req.Decode(&ev); err != nil {
			c.log.Warn("tool: bad event", "err", err)
			return
		}
		c.mu.Lock()
		subs := c.subs
		c.mu.Unlock()
		for _, s := range subs {
			if s.match(&ev) {
				s.fn(ev)
			}
		}
	case wire.KindProcOutput:
		var line wire.OutputLine
		if err := req.Decode(&line); err != nil {
			c.log.Warn("tool: bad output line", "err", err)
			return
		}
		c.mu.Lock()
		fn := c.onOutput
		c.mu.Unlock()
		if fn != nil {
			fn(line)
		}
	}
}

// OnOutput sets the callback for output lines of jobs launched through
// this client (with OutputFlags.Forward). Set it before Launch.
func (c *Client) OnOutput(fn func(wire.OutputLine)) {
	c.mu.Lock()
	c.onOutput = fn
	c.mu.Unlock()
}

// State returns a snapshot of the DVM: nodes with slots used, live jobs.
func (c *Client) State(ctx context.Context) (wire.DVMState, error) {
	return c.StateOf(ctx, wire.DVMStateReq{})
}

// StateOf is State with options (ended jobs).
func (c *Client) StateOf(ctx context.Context, req wire.DVMStateReq) (wire.DVMState, error) {
	var st wire.DVMState
	err := c.conn.Call(ctx, wire.KindDVMState, &req, &st)
	return st, err
}

// Launch starts a job. Its output (if forwarded) goes to the OnOutput
// callback; WaitJob waits for its end. Closing the client kills it.
func (c *Client) Launch(ctx context.Context, req wire.JobLaunchReq) (wire.JobLaunchReply, error) {
	var rep wire.JobLaunchReply
	err := c.conn.Call(ctx, wire.KindJobLaunch, &req, &rep)
	return rep, err
}

// WaitJob waits until job has ended and returns its final state, exit
// code, why it ended and its one-line report (JobInfo.Reason and Msg). Every output line the master forwarded for the
// job has been delivered to OnOutput before WaitJob returns.
func (c *Client) WaitJob(ctx context.Context, job string) (wire.JobInfo, error) {
	var end wire.JobInfo
	err := c.conn.Call(ctx, wire.KindJobWait, &wire.JobWaitReq{Job: job}, &end)
	return end, err
}

// Job returns the state of one job (with per-process detail if asked).
func (c *Client) Job(ctx context.Context, req wire.JobStateReq) (wire.JobInfo, error) {
	var info wire.JobInfo
	err := c.conn.Call(ctx, wire.KindJobState, &req, &info)
	return info, err
}

// Jobs lists the jobs of the DVM (ended ones too if all).
func (c *Client) Jobs(ctx context.Context, all bool) ([]wire.JobInfo, error) {
	var l wire.JobList
	err := c.conn.Call(ctx, wire.KindJobList, &wire.JobListReq{All: all}, &l)
	return l.Jobs, err
}

// KillJob signals every process of job with sig (0 = SIGTERM) and kills
// what is left after grace (0 = the master's default). It returns at once;
// WaitJob tells when the job has ended.
func (c *Client) KillJob(ctx context.Context, job string, sig int, grace time.Duration) error {
	return c.conn.Call(ctx, wire.KindJobKill, &wire.JobKillReq{Job: job, Signal: sig, GraceMS: grace.Milliseconds()}, nil)
}

// StopDVM stops the DVM (every job is killed, every daemon stopped) and
// returns once the master has closed the connection.
func (c *Client) StopDVM(ctx context.Context, grace time.Duration) error {
	err := c.conn.Call(ctx, wire.KindDVMStop, &wire.DVMStopReq{GraceMS: grace.Milliseconds()}, nil)
	if err != nil && !errors.Is(err, wire.ErrClosed) {
		return err
	}
	select {
	case <-c.conn.Done():
		return nil
	case <-ctx.Done():
		return wire.Errorf(wire.ErrTimeout, "tool: DVM %s did not stop: %w", c.info.ID, ctx.Err())
	}
}

// Subscribe asks for the events matching req and calls fn for each, in
// order (see the package doc for where fn runs). Events may arrive before
// Subscribe returns. It returns the subscription id.
func (c *Client) Subscribe(ctx context.Context, req wire.EventSubReq, fn func(wire.Event)) (uint64, error) {
	s := &subscription{kinds: slices.Clone(req.Kinds), job: req.Job, fn: fn}
	c.mu.Lock()
	c.subs = append(slices.Clip(c.subs), s) // copy on write: onEvent reads without the lock
	c.mu.Unlock()
	var rep wire.EventSubReply
	if err := c.conn.Call(ctx, wire.KindEventSub, &req, &rep); err != nil {
		c.dropSub(s)
		return 0, err
	}
	c.mu.Lock()
	s.id = rep.ID
	c.mu.Unlock()
	return rep.ID, nil
}

// Unsubscribe ends a subscription (all of them for id 0).
func (c *Client) Unsubscribe(ctx context.Context, id uint64) error {
	if err := c.conn.Call(ctx, wire.KindEventUnsub, &wire.EventUnsubReq{ID: id}, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.subs = slices.DeleteFunc(slices.Clone(c.subs), func(s *subscription) bool { return id == 0 || s.id == id })
	c.mu.Unlock()
	return nil
}

func (c *Client) dropSub(s *subscription) {
	c.mu.Lock()
	c.subs = slices.DeleteFunc(slices.Clone(c.subs), func(x *subscription) bool { return x == s })
	c.mu.Unlock()
}

// Grow adds nodes to the DVM (see wire.DVMGrowReq) and returns them once
// their daemons have registered.
func (c *Client) Grow(ctx context.Context, req wire.DVMGrowReq) ([]wire.NodeInfo, error) {
	var rep wire.DVMGrowReply
	err := c.conn.Call(ctx, wire.KindDVMGrow, &req, &rep)
	return rep.Nodes, err
}

// Shrink takes a node out of the DVM (see wire.DVMShrinkReq) and returns
// once it has left.
func (c *Client) Shrink(ctx context.Context, req wire.DVMShrinkReq) (wire.DVMShrinkReply, error) {
	var rep wire.DVMShrinkReply
	err := c.conn.Call(ctx, wire.KindDVMShrink, &req, &rep)
	return rep, err
}
