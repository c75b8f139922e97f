package session

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Publish makes kvs visible to lookups in rng (RangeJob: the caller's job;
// RangeDVM: every job of the DVM). A key already published in the range
// fails the whole call with wire.ErrExists. Entries last until
// unpublished; those of the job range also go when the job ends.
func (s *Session) Publish(ctx context.Context, kvs map[string][]byte, rng Range) error {
	keys := slices.Sorted(maps.Keys(kvs))
	data := make([]wire.KV, len(keys))
	for i, k := range keys {
		data[i] = wire.KV{Key: k, Value: kvs[k]}
	}
	return s.call(ctx, wire.KindPublish, &wire.PublishReq{Range: string(rng), Data: data}, nil)
}

// Range is where published data is visible.
type Range string

// Publish ranges.
const (
	RangeJob Range = wire.RangeJob // the publisher's job
	RangeDVM Range = wire.RangeDVM // every job of the DVM
)

// LookupOptions modify a Lookup.
type LookupOptions struct {
	Range   Range         // where to look (default RangeJob)
	Wait    bool          // wait until every key is published instead of failing with wire.ErrNotFound
	Timeout time.Duration // with Wait: give up after this long with wire.ErrTimeout (0 = ctx's deadline only)
}

// Lookup returns the values published under keys.
func (s *Session) Lookup(ctx context.Context, keys []string, o LookupOptions) (map[string][]byte, error) {
	req := &wire.LookupReq{Range: string(o.Range), Keys: keys, Wait: o.Wait}
	if o.Wait {
		req.TimeoutMS = timeoutMS(ctx, o.Timeout)
	}
	var rep wire.LookupReply
	if err := s.call(ctx, wire.KindLookup, req, &rep); err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(rep.Data))
	for _, kv := range rep.Data {
		out[kv.Key] = kv.Value
	}
	return out, nil
}

// Unpublish removes keys this process published in rng (all of them when
// keys is empty).
func (s *Session) Unpublish(ctx context.Context, keys []string, rng Range) error {
	return s.call(ctx, wire.KindUnpublish, &wire.UnpublishReq{Range: string(rng), Keys: keys}, nil)
}
