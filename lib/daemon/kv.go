package daemon

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dynrt/dynrt/wire"
)

// The key-value store (DESIGN §6). A process's committed data stays on the
// daemon of its node, which answers gets by local processes directly. A get
// for a process elsewhere is fetched from the owner's daemon through the
// master (kv.fetch, which knows where every rank runs) and the owner's
// whole committed data is cached here; a fence over the owner makes the
// cache stale (dropped), a fence with collect replaces it.

func (s *sessionState) handlePut(_ context.Context, req *wire.Request, b *wire.KVPutReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	if b.Key == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon: kv.put with an empty key")
	}
	k := procKey{c.Job, c.Rank}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.staged[k]
	if m == nil {
		m = make(map[string][]byte)
		s.staged[k] = m
	}
	m[b.Key] = b.Value
	return nil, nil
}

func (s *sessionState) handleCommit(_ context.Context, req *wire.Request, b *wire.KVCommitReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	for _, kv := range b.Data {
		if kv.Key == "" {
			return nil, wire.Errorf(wire.ErrInvalid, "daemon: kv.commit with an empty key")
		}
	}
	k := procKey{c.Job, c.Rank}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.committed[k]
	if m == nil {
		m = make(map[string][]byte, len(b.Data)+len(s.staged[k]))
		s.committed[k] = m
	}
	maps.Copy(m, s.staged[k])
	delete(s.staged, k)
	for _, kv := range b.Data {
		m[kv.Key] = kv.Value
	}
	close(s.changed) // wake gets waiting for a key
	s.changed = make(chan struct{})
	return nil, nil
}

func (s *sessionState) handleGet(ctx context.Context, req *wire.Request, b *wire.KVGetReq) (any, error) {
	c, err := CallerOf(req)
	if err != nil {
		return nil, err
	}
	if b.Key == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon: kv.get with an empty key")
	}
	owner := procKey{b.Job, b.Rank}
	if owner.job == "" {
		owner.job = c.Job
	}
	ctx, cancel := withTimeout(ctx, b.TimeoutMS)
	defer cancel()
	if s.isLocal(owner) {
		v, err := s.waitLocal(ctx, owner, b.Key, b.Wait)
		if err != nil {
			return nil, err
		}
		return &wire.KVGetReply{Value: v}, nil
	}
	return s.getRemote(ctx, owner, b)
}

// isLocal reports whether owner's data lives on this daemon.
func (s *sessionState) isLocal(owner procKey) bool {
	s.mu.Lock()
	_, ok := s.committed[owner]
	s.mu.Unlock()
	return ok || s.d.runsHere(owner.job, owner.rank)
}

// waitLocal returns the value of key committed by a local owner, waiting
// for the commit if asked to.
func (s *sessionState) waitLocal(ctx context.Context, owner procKey, key string, wait bool) ([]byte, error) {
	for {
		s.mu.Lock()
		v, ok := s.committed[owner][key]
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return v, nil
		}
		if !wait {
			return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: %s has committed no key %q", s.d.node, owner, key)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctxErr(ctx, "daemon %s: waiting for key %q of %s", s.d.node, key, owner)
		}
	}
}

func (s *sessionState) getRemote(ctx context.Context, owner procKey, b *wire.KVGetReq) (any, error) {
	if !b.Refresh {
		s.mu.Lock()
		s.unreadLocked()
		v, ok := s.remote[owner][b.Key]
		s.mu.Unlock()
		if ok {
			return &wire.KVGetReply{Value: v}, nil
		}
	}
	s.mu.Lock()
	gen := s.remoteGen
	s.mu.Unlock()
	var rep wire.KVFetchReply
	err := s.d.master.Call(ctx, wire.KindKVFetch, &wire.KVFetchReq{
		Procs: []wire.ProcRanges{{Job: owner.job, Ranks: wire.Span(owner.rank, owner.rank)}},
		Key:   b.Key, Wait: b.Wait, TimeoutMS: msLeft(ctx),
	}, &rep)
	if err != nil {
		return nil, err
	}
	var data map[string][]byte
	for _, p := range rep.Data {
		if p.Job == owner.job && p.Rank == owner.rank {
			data = kvMap(p.Data)
		}
	}
	s.mu.Lock()
	// A fence that completed while the fetch was under way may have made
	// what it returns stale: use it for this get but do not keep it.
	if s.remoteGen == gen && data != nil {
		s.unreadLocked()
		s.remote[owner] = data
	}
	s.mu.Unlock()
	v, ok := data[b.Key]
	if !ok {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: %s has committed no key %q", s.d.node, owner, b.Key)
	}
	return &wire.KVGetReply{Value: v}, nil
}

// handleFetch serves kv.fetch from the master: the committed data of the
// owners that live here, optionally once Key has been committed.
func (s *sessionState) handleFetch(ctx context.Context, _ *wire.Request, b *wire.KVFetchReq) (any, error) {
	ctx, cancel := withTimeout(ctx, b.TimeoutMS)
	defer cancel()
	if b.Key == pmixModexKey {
		return s.d.pmixModexFetch(ctx, b) // a PMIx direct modex (pmix.go)
	}
	if b.Wait && b.Key != "" {
		if len(b.Procs) != 1 || b.Procs[0].Ranks.Count() != 1 {
			return nil, wire.Errorf(wire.ErrInvalid, "daemon: kv.fetch waits for the key of exactly one process")
		}
		owner := procKey{b.Procs[0].Job, b.Procs[0].Ranks[0].Lo}
		if _, err := s.waitLocal(ctx, owner, b.Key, true); err != nil {
			return nil, err
		}
	}
	rep := &wire.KVFetchReply{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pr := range b.Procs {
		for r := range pr.Ranks.All() {
			if m, ok := s.committed[procKey{pr.Job, r}]; ok {
				rep.Data = append(rep.Data, wire.ProcKV{Job: pr.Job, Rank: r, Data: kvList(m)})
			}
		}
	}
	return rep, nil
}

// fenced updates the cache after a fence: the participants may have
// committed since their data was fetched, so it is dropped, or replaced by
// the collected data.
func (s *sessionState) fenced(job string, procs []wire.ProcRanges, collect bool, data []wire.ProcKV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fencedLocked(job, procs, collect, data)
}

// fencedLocked is fenced with s.mu held.
func (s *sessionState) fencedLocked(job string, procs []wire.ProcRanges, collect bool, data []wire.ProcKV) {
	// The jobs the fence names whole (no entries: the caller's job; an
	// entry without ranks: every live process of its job): all that is
	// known of their processes goes, and data of one of them alone not
	// read yet need not be decoded.
	whole := map[string]bool{}
	if len(procs) == 0 {
		whole[job] = true
	}
	for _, pr := range procs {
		if len(pr.Ranks) == 0 {
			whole[cmp.Or(pr.Job, job)] = true
		}
	}
	s.unread = slices.DeleteFunc(s.unread, func(u unreadData) bool { return u.onlyJob && whole[u.job] })
	s.unreadLocked()
	s.remoteGen++
	for k := range s.remote {
		if whole[k.job] {
			delete(s.remote, k)
		}
	}
	for _, pr := range procs {
		j := cmp.Or(pr.Job, job)
		for r := range pr.Ranks.All() {
			delete(s.remote, procKey{j, r})
		}
	}
	if collect {
		s.storeCollected(data)
	}
}

// storeCollected puts a fence's collected data into the store of remote
// data, for the owners that do not live here. s.mu must be held.
func (s *sessionState) storeCollected(data []wire.ProcKV) {
	for _, p := range data {
		k := procKey{p.Job, p.Rank}
		if _, local := s.committed[k]; !local {
			s.remote[k] = kvMap(p.Data)
		}
	}
}

func kvList(m map[string][]byte) []wire.KV {
	out := make([]wire.KV, 0, len(m))
	for k, v := range m {
		out = append(out, wire.KV{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b wire.KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func kvMap(l []wire.KV) map[string][]byte {
	m := make(map[string][]byte, len(l))
	for _, kv := range l {
		m[kv.Key] = kv.Value
	}
	return m
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// msLeft is the time left until ctx's deadline in ms (at least 1), or 0
// without a deadline: the timeout to pass on with a relayed request.
func msLeft(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(dl).Milliseconds(), 1)
}

// ctxErr describes why ctx ended: ErrTimeout for a deadline, else
// ErrCanceled.
func ctxErr(ctx context.Context, format string, args ...any) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return wire.Errorf(wire.ErrTimeout, format+": timed out", args...)
	}
	return wire.Errorf(wire.ErrCanceled, format+": %w", append(args, err)...)
}

// fencedKeep is how many fence instances a daemon remembers having applied
// from kv.fenced: a late copy down the tree comes within a relay's wait of
// the master's resend, so a short memory suffices.
const fencedKeep = 256

// fenceDataRaw is wire.FenceData with the data left encoded: a daemon
// decodes it when one of its processes first reads data it did not have
// (unreadLocked), not when it arrives. In a wire-up every daemon gets every
// process's data, and decoding it all is most of a fence's cost (its N
// entries on each of N daemons); processes often read only their peers'.
type fenceDataRaw struct {
	Inst  uint64            `msgpack:"i"`
	Job   string            `msgpack:"j,omitempty"`
	Procs []wire.ProcRanges `msgpack:"p,omitempty"`
	Data  wire.Raw          `msgpack:"d,omitempty"` // an encoded []wire.ProcKV
}

// handleFenced applies the collected data of a fence instance sent as
// kv.fenced (wire.FenceData), once per instance: the master answers this
// daemon's entries with Stored once it has. A late copy (the master sent
// it again directly) is not applied again, so it cannot put back data that
// a later fence replaced. What the fence makes stale is dropped now; the
// new data is kept encoded until it is first needed.
func (s *sessionState) handleFenced(_ context.Context, req *wire.Request) (any, error) {
	var b fenceDataRaw
	if err := req.Decode(&b); err != nil {
		return nil, err
	}
	if b.Job == "" || b.Inst == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: kv.fenced without its job or instance number", s.d.node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Contains(s.fencedInsts, b.Inst) {
		return nil, nil
	}
	if len(s.fencedInsts) == fencedKeep {
		s.fencedInsts = s.fencedInsts[1:]
	}
	s.fencedInsts = append(s.fencedInsts, b.Inst)
	s.fencedLocked(b.Job, b.Procs, false, nil) // what it makes stale goes now
	if len(b.Data) > 0 {
		only := !slices.ContainsFunc(b.Procs, func(pr wire.ProcRanges) bool { return pr.Job != "" && pr.Job != b.Job })
		s.unread = append(s.unread, unreadData{job: b.Job, onlyJob: only, raw: msgpack.RawMessage(b.Data)})
	}
	return nil, nil
}

// unreadData is a fence's collected data kept encoded (handleFenced).
type unreadData struct {
	job     string
	onlyJob bool // it holds data of job's processes only
	raw     msgpack.RawMessage
}

// unreadLocked puts the collected data kept encoded (handleFenced) into
// the store of remote data, in the order it came. Everything that reads
// or changes that store calls it first, so that the data stands where it
// would have had it been applied on arrival. s.mu must be held.
func (s *sessionState) unreadLocked() {
	for i, u := range s.unread {
		var data []wire.ProcKV
		if err := wire.Unmarshal(u.raw, &data); err != nil {
			s.d.log.Warn("daemon: a fence's collected data cannot be decoded; its processes' values will be fetched", "err", err)
			continue
		}
		s.unread[i] = unreadData{}
		s.storeCollected(data)
	}
	s.unread = s.unread[:0]
}
