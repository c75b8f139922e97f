package main

import (
	"context"
	"errors"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/lib/top"
	"github.com/dynrt/dynrt/wire"
)

// Timing of the feeder.
const (
	// batchWindow is how long events are gathered before they go to the
	// screen as one message: at most one update and one frame per window,
	// however fast the bus runs. Nothing is dropped.
	batchWindow = 15 * time.Millisecond
	// retryEvery is how often --wait tries to attach again once the DVM
	// is gone (the rendezvous directory has no change notification that
	// works everywhere).
	retryEvery = 500 * time.Millisecond
	// callTimeout bounds each request to the master.
	callTimeout = 15 * time.Second
)

// subscribed are the event kinds dyntop shows (everything but output).
var subscribed = []string{"job.", "proc.", "pset.", "rc.", "node.", wire.EvApp}

// feeder connects dyntop to the master: it subscribes to the event bus,
// takes a snapshot, forwards events in batches and fetches what events
// leave unknown. Everything it learns goes to the screen through send.
type feeder struct {
	opts tool.Options
	send func(tea.Msg)
	wait bool

	mu sync.Mutex
	cl *tool.Client
}

// client returns the current connection (nil while detached).
func (f *feeder) client() *tool.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cl
}

// run attaches and feeds until ctx ends, or the DVM is gone and the
// feeder does not wait. first is the client Main already attached.
func (f *feeder) run(ctx context.Context, first *tool.Client) {
	cl := first
	for {
		if cl == nil {
			var err error
			actx, cancel := context.WithTimeout(ctx, callTimeout)
			cl, err = tool.Attach(actx, f.opts)
			cancel()
			if err != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(retryEvery):
				}
				continue
			}
			f.send(top.ReconnectedMsg{ID: cl.Info().ID})
		}
		f.mu.Lock()
		f.cl = cl
		f.mu.Unlock()
		err := f.session(ctx, cl)
		cl.Close()
		f.mu.Lock()
		f.cl = nil
		f.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		f.send(top.LostMsg{At: time.Now(), Err: err})
		if !f.wait {
			return
		}
		cl = nil
	}
}

// session feeds from one connection until it is lost.
func (f *feeder) session(ctx context.Context, cl *tool.Client) error {
	var (
		mu      sync.Mutex
		pending []wire.Event
	)
	kick := make(chan struct{}, 1)
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	// Since 1: the master first replays the events it keeps, for the log.
	_, err := cl.Subscribe(sctx, wire.EventSubReq{Kinds: subscribed, Since: 1}, func(ev wire.Event) {
		mu.Lock()
		pending = append(pending, ev)
		mu.Unlock()
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	cancel()
	if err != nil {
		return err
	}
	if err := f.snapshot(ctx, cl); err != nil {
		return err
	}
	for {
		select {
		case <-kick:
		case <-cl.Done():
			return closedErr(cl)
		case <-ctx.Done():
			return nil
		}
		// Gather for a moment, then deliver the batch and fetch what it
		// leaves unknown.
		select {
		case <-time.After(batchWindow):
		case <-cl.Done():
		case <-ctx.Done():
			return nil
		}
		mu.Lock()
		batch := pending
		pending = nil
		mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		f.send(top.EventsMsg(batch))
		if err := f.fetch(ctx, cl, top.NeedsOf(batch)); err != nil && cl.Conn().Err() != nil {
			return closedErr(cl)
		}
	}
}

func closedErr(cl *tool.Client) error {
	if err := cl.Conn().Err(); err != nil {
		return err
	}
	return errors.New("connection closed")
}

// snapshot sends the whole picture: nodes, jobs, changes, sets.
func (f *feeder) snapshot(ctx context.Context, cl *tool.Client) error {
	snap, sets, err := takeSnapshot(ctx, cl)
	if err != nil {
		return err
	}
	f.send(top.SnapshotMsg(snap))
	for _, s := range sets {
		f.send(s)
	}
	return nil
}

// takeSnapshot reads the DVM state (ended jobs included), the changes and
// the sets of every live job.
func takeSnapshot(ctx context.Context, cl *tool.Client) (top.Snapshot, []top.PsetsMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := cl.StateOf(ctx, wire.DVMStateReq{Ended: true})
	if err != nil {
		return top.Snapshot{}, nil, err
	}
	snap := top.Snapshot{State: st, Name: cl.Info().Name, At: time.Now()}
	if rcs, err := cl.RCs(ctx, ""); err == nil {
		snap.RCs = rcs
	} else if !errors.Is(err, wire.ErrUnknownKind) {
		return top.Snapshot{}, nil, err
	}
	var sets []top.PsetsMsg
	for _, j := range st.Jobs {
		if done := j.State == wire.JobStateDone || j.State == wire.JobStateFailed || j.State == wire.JobStateKilled; done {
			continue
		}
		ps, err := cl.Psets(ctx, wire.PsetListReq{Job: j.Job, Members: true})
		if err != nil {
			continue // the job may have just ended
		}
		sets = append(sets, top.PsetsMsg{Job: j.Job, Sets: ps})
	}
	return snap, sets, nil
}

// fetch gets what a batch of events needs.
func (f *feeder) fetch(ctx context.Context, cl *tool.Client, need top.Need) error {
	if need.Empty() {
		return nil
	}
	if need.Snapshot {
		return f.snapshot(ctx, cl)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var firstErr error
	for _, job := range need.Jobs {
		in, err := cl.Job(ctx, wire.JobStateReq{Job: job})
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		f.send(top.JobMsg(in))
	}
	for _, job := range need.Psets {
		ps, err := cl.Psets(ctx, wire.PsetListReq{Job: job, Members: true})
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		f.send(top.PsetsMsg{Job: job, Sets: ps})
	}
	if need.Slots {
		// Events name a process's node, not its slot: ask for the map.
		st, err := cl.State(ctx)
		if err != nil {
			return cmpErr(firstErr, err)
		}
		f.send(top.SlotsMsg(st.Slots))
	}
	return firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// request makes an add/sub request for the screen.
func (f *feeder) request(ctx context.Context) func(wire.RCRequest) tea.Cmd {
	return func(req wire.RCRequest) tea.Cmd {
		return func() tea.Msg {
			cl := f.client()
			if cl == nil {
				return top.RCResultMsg{Err: errors.New("not attached to a DVM")}
			}
			rctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			rc, err := cl.RequestRC(rctx, req)
			if errors.Is(err, wire.ErrUnknownKind) {
				err = errors.New("this DVM does not take resource-change requests")
			}
			return top.RCResultMsg{RC: rc, Err: err}
		}
	}
}
