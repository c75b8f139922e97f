package session

import (
	"context"
	"maps"
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// Put stages a value under key for this process. Others see it after
// Commit (and, to be sure to see the latest value, after a fence that
// both sides take part in). Putting a key again replaces the value.
func (s *Session) Put(key string, value []byte) error {
	if key == "" {
		return wire.Errorf(wire.ErrInvalid, "session: put with an empty key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errFinalized
	}
	s.staged[key] = slices.Clone(value)
	return nil
}

// Commit makes the staged values visible to other processes, in one
// message to the daemon.
func (s *Session) Commit(ctx context.Context) error {
	s.mu.Lock()
	staged := s.staged
	s.staged = map[string][]byte{}
	s.mu.Unlock()
	keys := slices.Sorted(maps.Keys(staged))
	data := make([]wire.KV, len(keys))
	for i, k := range keys {
		data[i] = wire.KV{Key: k, Value: staged[k]}
	}
	if err := s.call(ctx, wire.KindKVCommit, &wire.KVCommitReq{Data: data}, nil); err != nil {
		// Put them back (unless put again meanwhile) so a retry commits them.
		s.mu.Lock()
		for k, v := range staged {
			if _, ok := s.staged[k]; !ok {
				s.staged[k] = v
			}
		}
		s.mu.Unlock()
		return err
	}
	return nil
}

// GetOption modifies a Get.
type GetOption func(*getOptions)

type getOptions struct {
	job           string
	wait, refresh bool
}

// Wait makes Get wait until the owner has committed the key (bounded by
// ctx) instead of failing with wire.ErrNotFound.
func Wait() GetOption { return func(o *getOptions) { o.wait = true } }

// FromJob reads the data of a process of another job (by namespace).
func FromJob(job string) GetOption { return func(o *getOptions) { o.job = job } }

// Refresh fetches a remote owner's data again instead of answering from
// the local daemon's cache.
func Refresh() GetOption { return func(o *getOptions) { o.refresh = true } }

// Get returns the value key committed by process rank of the caller's job
// (see FromJob). Data of a process on another node is fetched from that
// node's daemon on demand and cached by the local one (until a fence over
// that process); after a fence with collect it is already here. Values
// put but not yet committed are not visible, not even to the process
// itself.
func (s *Session) Get(ctx context.Context, rank uint32, key string, opts ...GetOption) ([]byte, error) {
	var o getOptions
	for _, f := range opts {
		f(&o)
	}
	b := &wire.KVGetReq{Job: o.job, Rank: rank, Key: key, Wait: o.wait, Refresh: o.refresh}
	if o.wait {
		b.TimeoutMS = timeoutMS(ctx, 0)
	}
	var rep wire.KVGetReply
	if err := s.call(ctx, wire.KindKVGet, b, &rep); err != nil {
		return nil, err
	}
	return rep.Value, nil
}

// FenceOptions describe a fence.
type FenceOptions struct {
	// Procs are the participants; an entry without a job means the
	// caller's job, an entry without ranks every live process of its job.
	// Empty means every live process of the caller's job.
	Procs []wire.ProcRanges
	// ID names the fence, to tell apart fences over the same processes
	// that may run at the same time.
	ID string
	// Collect brings the participants' committed data to every
	// participant's daemon, so that later gets are answered locally.
	Collect bool
}

// Fence waits until every process in ranks (of the caller's job; nil
// means all of its live processes) has entered the same fence. Data the
// participants committed before entering is visible to gets after it;
// with collect it is already on the local daemon. A participant that ends
// before entering makes the fence fail with wire.ErrAborted; ctx's
// deadline is passed on, so an abandoned fence is withdrawn.
func (s *Session) Fence(ctx context.Context, ranks []uint32, collect bool) error {
	o := FenceOptions{Collect: collect}
	if ranks != nil {
		o.Procs = []wire.ProcRanges{{Ranks: wire.RangesOf(ranks)}}
		if len(ranks) == 0 {
			return wire.Errorf(wire.ErrInvalid, "session: fence over no processes")
		}
	}
	return s.FenceWith(ctx, o)
}

// FenceWith is Fence with every option.
func (s *Session) FenceWith(ctx context.Context, o FenceOptions) error {
	req := &wire.FenceReq{ID: o.ID, Procs: o.Procs, Collect: o.Collect, TimeoutMS: timeoutMS(ctx, 0)}
	return s.call(ctx, wire.KindFence, req, nil)
}
