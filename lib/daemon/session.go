package daemon

import (
	"context"
	"slices"
	"sync"

	"github.com/dynrt/dynrt/wire"
)

// sessionState is the daemon's part of the session services (DESIGN §6):
// the key-value data committed by local processes, a cache of data fetched
// from other nodes, and the event subscriptions of local clients. It has
// its own lock so that store operations never hold up d.mu; s.mu may be
// taken while d.mu is held, never the other way round.
type sessionState struct {
	d *Daemon

	mu        sync.Mutex
	staged    map[procKey]map[string][]byte // kv.put not yet committed
	committed map[procKey]map[string][]byte // owner's committed data, for local owners
	remote    map[procKey]map[string][]byte // data of owners elsewhere (fetched or collected)
	remoteGen uint64                        // bumped when remote entries are invalidated
	changed   chan struct{}                 // closed and replaced on every commit (wakes waiting gets)

	subs    map[uint64]*clientSub       // event subscriptions of clients, by local id
	queues  map[*wire.Conn]*clientQueue // event writers, one per subscribed client connection
	lastSub uint64

	fences      fenceTable   // rounds of local fence entries (fence.go)
	fencedInsts []uint64     // fence instances applied from kv.fenced, oldest first (at most fencedKeep)
	unread      []unreadData // collected data from kv.fenced not decoded yet, oldest first (unreadLocked)
}

func newSessionState(d *Daemon) *sessionState {
	return &sessionState{
		d:         d,
		staged:    make(map[procKey]map[string][]byte),
		committed: make(map[procKey]map[string][]byte),
		remote:    make(map[procKey]map[string][]byte),
		changed:   make(chan struct{}),
		subs:      make(map[uint64]*clientSub),
		queues:    make(map[*wire.Conn]*clientQueue),
		fences:    fenceTable{rounds: make(map[fenceKey][]*fenceRound)},
	}
}

// sessionRoutes registers the session services: called once from routes.
func (d *Daemon) sessionRoutes() {
	s := newSessionState(d)
	d.sess = s

	// Key-value store, answered here or fetched through the master.
	wire.HandleTyped(d.clients, wire.KindKVPut, s.handlePut)
	wire.HandleTyped(d.clients, wire.KindKVCommit, s.handleCommit)
	wire.HandleTyped(d.clients, wire.KindKVGet, s.handleGet)
	wire.HandleTyped(d.clients, wire.KindFence, s.handleFence)
	wire.HandleTyped(d.fromMaster, wire.KindKVFetch, s.handleFetch)
	d.fromMaster.Handle(wire.KindFenced, s.handleFenced) // decodes the data only when it is read (fenceDataRaw)

	// Event subscriptions: kept here, backed by the master's bus.
	wire.HandleTyped(d.clients, wire.KindEventSub, s.handleEventSub)
	wire.HandleTyped(d.clients, wire.KindEventUnsub, s.handleEventUnsub)

	// Relayed to the master with the caller's identity.
	relay(d, wire.KindPublish, func(b *wire.PublishReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	relay(d, wire.KindLookup, func(b *wire.LookupReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	relay(d, wire.KindUnpublish, func(b *wire.UnpublishReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	relay(d, wire.KindGroupConstruct, func(b *wire.GroupReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	relay(d, wire.KindGroupDestruct, func(b *wire.GroupReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
	relay(d, wire.KindEventNotify, func(b *wire.EventNotifyReq, c Caller) { b.Job, b.Rank = c.Job, c.Rank })
}

// dropSessionJob forgets the session data of an ended job (node.jobdata
// with Gone).
func (d *Daemon) dropSessionJob(job string) {
	if d.sess != nil {
		d.sess.dropJob(job)
	}
}

func (s *sessionState) dropJob(job string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Collected data of the job alone not read yet goes undecoded: when a
	// job that wired up ends, every daemon would otherwise decode every
	// process's data only to drop it.
	s.unread = slices.DeleteFunc(s.unread, func(u unreadData) bool { return u.onlyJob && u.job == job })
	s.unreadLocked()
	for _, m := range []map[procKey]map[string][]byte{s.staged, s.committed, s.remote} {
		for k := range m {
			if k.job == job {
				delete(m, k)
			}
		}
	}
}

// onMasterEvent takes the events the master pushes to this daemon: bus
// events for the subscriptions of local clients (evorder.go). It runs on
// the master connection's reader goroutine and never blocks for long.
func (d *Daemon) onMasterEvent(ev *wire.Request) {
	if d.sess == nil || ev.Kind != wire.KindNodeEvent && ev.Kind != wire.KindEvent {
		d.log.Debug("daemon: ignored event from master", "kind", ev.Kind)
		return
	}
	if ev.Kind == wire.KindEvent { // without its place in the order
		kind, job, err := wire.EventHead(ev.Body)
		if err != nil {
			d.log.Warn("daemon: bad event from master", "err", err)
			return
		}
		d.sess.forward(kind, job, ev.Body)
		return
	}
	var ne wire.NodeEvent
	if err := wire.Unmarshal(ev.Body, &ne); err != nil {
		d.log.Warn("daemon: bad event from master", "err", err)
		return
	}
	if err := d.deliverEvent(ne.Prev, ne.Ev); err != nil {
		d.log.Warn("daemon: bad event from master", "err", err)
	}
}

// runsHere reports whether rank of job was placed on this node (a rank
// that a change in flight removes still runs here).
func (d *Daemon) runsHere(job string, rank uint32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	jc := d.jobs[job]
	return jc != nil && (jc.local.Contains(rank) || jc.data.Leaving.Contains(rank) && d.live[procKey{job, rank}] != nil)
}

// withTimeout bounds ctx by a request's timeout in ms (0 = no bound).
func withTimeout(ctx context.Context, ms int64) (context.Context, context.CancelFunc) {
	if ms > 0 {
		return context.WithTimeout(ctx, msDuration(ms))
	}
	return context.WithCancel(ctx)
}
