package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Publish/lookup (the data server of DESIGN §6). Keys live in a range: the
// publisher's job (visible to its processes) or the whole DVM (how two
// jobs find each other). A lookup with wait is answered as soon as its
// last key is published. Entries go away when unpublished; the job range
// of a job also goes away when the job ends, while DVM-wide entries stay
// until unpublished (a job may publish for jobs that start after its end).
// A publish may ask for a shorter life (wire.Persist*, PMIx's
// PMIX_PERSISTENCE): until its job ends, until its process ends, or until
// the first lookup that finds it.

// pubStore is the data server's state: pure logic, run on the loop.
type pubStore struct {
	ranges  map[string]map[string]pubEntry // range key → key → entry
	waiters map[*lookupWaiter]struct{}
}

type pubEntry struct {
	value   []byte
	owner   procRef
	persist string // wire.Persist*
}

// lookupWaiter is a lookup with wait whose keys are not all published.
type lookupWaiter struct {
	rng   string
	keys  []string
	job   string // the caller's job
	reply func(*wire.LookupReply, error)
}

func (p *pubStore) init() {
	p.ranges = make(map[string]map[string]pubEntry)
	p.waiters = make(map[*lookupWaiter]struct{})
}

// rangeKey names the range a request means.
func rangeKey(rng, job string) (string, error) {
	switch rng {
	case "", wire.RangeJob:
		if job == "" {
			return "", wire.Errorf(wire.ErrInvalid, "master: job range without a job")
		}
		return "job:" + job, nil
	case wire.RangeDVM:
		return "dvm", nil
	}
	return "", wire.Errorf(wire.ErrInvalid, "master: unknown publish range %q (want %q or %q)", rng, wire.RangeJob, wire.RangeDVM)
}

// publish stores every key of data or, if one is already published in the
// range, none of them; then answers the waiters it completes.
func (p *pubStore) publish(rng string, owner procRef, persist string, data []wire.KV) error {
	if len(data) == 0 {
		return wire.Errorf(wire.ErrInvalid, "master: nothing to publish")
	}
	switch persist {
	case wire.PersistDefault, wire.PersistIndef, wire.PersistSession, wire.PersistApp, wire.PersistProc, wire.PersistFirstRead:
	default:
		return wire.Errorf(wire.ErrInvalid, "master: unknown publish persistence %q (want %q, %q, %q, %q, %q or none)", persist,
			wire.PersistIndef, wire.PersistSession, wire.PersistApp, wire.PersistProc, wire.PersistFirstRead)
	}
	m := p.ranges[rng]
	seen := make(map[string]bool, len(data))
	for _, kv := range data {
		if kv.Key == "" {
			return wire.Errorf(wire.ErrInvalid, "master: cannot publish an empty key")
		}
		if seen[kv.Key] {
			return wire.Errorf(wire.ErrInvalid, "master: key %q given twice", kv.Key)
		}
		seen[kv.Key] = true
		if e, ok := m[kv.Key]; ok {
			return wire.Errorf(wire.ErrExists, "master: key %q is already published in range %s (by %s)", kv.Key, rng, e.owner)
		}
	}
	if m == nil {
		m = make(map[string]pubEntry, len(data))
		p.ranges[rng] = m
	}
	for _, kv := range data {
		m[kv.Key] = pubEntry{value: kv.Value, owner: owner, persist: persist}
	}
	for w := range p.waiters {
		if w.rng != rng {
			continue
		}
		// find again for each waiter: an earlier one may have taken a
		// first-read key.
		if found, missing := p.find(rng, w.keys); len(missing) == 0 {
			delete(p.waiters, w)
			p.consume(rng, w.keys)
			w.reply(&wire.LookupReply{Data: found}, nil)
		}
	}
	return nil
}

// find returns the published values of keys, in order, and the keys that
// are missing.
func (p *pubStore) find(rng string, keys []string) ([]wire.KV, []string) {
	m := p.ranges[rng]
	out := make([]wire.KV, 0, len(keys))
	var missing []string
	for _, k := range keys {
		e, ok := m[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		out = append(out, wire.KV{Key: k, Value: e.value})
	}
	return out, missing
}

// lookup answers w now if every key is published, else registers it when
// wait is set, else fails with ErrNotFound.
func (p *pubStore) lookup(w *lookupWaiter, wait bool) {
	if len(w.keys) == 0 {
		w.reply(nil, wire.Errorf(wire.ErrInvalid, "master: lookup of no keys"))
		return
	}
	found, missing := p.find(w.rng, w.keys)
	switch {
	case len(missing) == 0:
		p.consume(w.rng, w.keys)
		w.reply(&wire.LookupReply{Data: found}, nil)
	case wait:
		p.waiters[w] = struct{}{}
	default:
		w.reply(nil, wire.Errorf(wire.ErrNotFound, "master: %s not published in range %s", quoteKeys(missing), w.rng))
	}
}

// consume removes the first-read keys among keys, which a lookup has just
// found (a lookup that misses a key finds nothing, and takes nothing).
func (p *pubStore) consume(rng string, keys []string) {
	m := p.ranges[rng]
	for _, k := range keys {
		if e, ok := m[k]; ok && e.persist == wire.PersistFirstRead {
			delete(m, k)
		}
	}
}

// expire removes the keys whose life ended with what ended: with a rank,
// the keys that process published to live as long as it; without, those
// its job published to live as long as the job or one of its processes.
func (p *pubStore) expire(job string, rank uint32, proc bool) {
	for _, m := range p.ranges {
		for k, e := range m {
			if e.owner.job != job || (proc && e.owner.rank != rank) {
				continue
			}
			if e.persist == wire.PersistProc || (!proc && e.persist == wire.PersistApp) {
				delete(m, k)
			}
		}
	}
}

func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	if len(q) == 1 {
		return "key " + q[0] + " is"
	}
	return "keys " + strings.Join(q, ", ") + " are"
}

// unpublish removes keys owner published in rng (all of them when keys is
// empty). Naming a key that owner did not publish is an error and removes
// nothing.
func (p *pubStore) unpublish(rng string, owner procRef, keys []string) error {
	m := p.ranges[rng]
	if len(keys) == 0 {
		for k, e := range m {
			if e.owner == owner {
				delete(m, k)
			}
		}
		return nil
	}
	for _, k := range keys {
		e, ok := m[k]
		switch {
		case !ok:
			return wire.Errorf(wire.ErrNotFound, "master: key %q is not published in range %s", k, rng)
		case e.owner != owner:
			return wire.Errorf(wire.ErrPermission, "master: key %q in range %s was published by %s, not %s", k, rng, e.owner, owner)
		}
	}
	for _, k := range keys {
		delete(m, k)
	}
	return nil
}

// dropJob removes the job's range, its keys that lived as long as it, and
// its waiters.
func (p *pubStore) dropJob(job string) {
	delete(p.ranges, "job:"+job)
	p.expire(job, 0, false)
	for w := range p.waiters {
		if w.job == job {
			delete(p.waiters, w)
			w.reply(nil, wire.Errorf(wire.ErrAborted, "master: job %s has ended", job))
		}
	}
}

func (ss *sessState) handlePublish(ctx context.Context, _ *wire.Request, b *wire.PublishReq) (any, error) {
	return nil, do(ctx, ss.m, func(s *state) error {
		rng, err := rangeKey(b.Range, b.Job)
		if err != nil {
			return err
		}
		return ss.pub.publish(rng, procRef{b.Job, b.Rank}, b.Persist, b.Data)
	})
}

func (ss *sessState) handleLookup(ctx context.Context, _ *wire.Request, b *wire.LookupReq) (any, error) {
	rng, err := rangeKey(b.Range, b.Job)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxTimeout(ctx, b.TimeoutMS)
	defer cancel()
	w := &lookupWaiter{rng: rng, keys: slices.Clone(b.Keys), job: b.Job}
	rep, err := ask(ctx, ss.m, func(s *state, reply func(*wire.LookupReply, error)) {
		w.reply = reply
		ss.pub.lookup(w, b.Wait)
	})
	if err != nil && ctx.Err() != nil {
		ss.m.post(func(*state) { delete(ss.pub.waiters, w) })
		if errors.Is(err, wire.ErrTimeout) && b.TimeoutMS > 0 {
			return nil, wire.Errorf(wire.ErrTimeout, "master: lookup of %s in range %s: not published within %v",
				strings.Join(b.Keys, ", "), rng, time.Duration(b.TimeoutMS)*time.Millisecond)
		}
		return nil, fmt.Errorf("master: lookup: %w", err)
	}
	return rep, err
}

func (ss *sessState) handleUnpublish(ctx context.Context, _ *wire.Request, b *wire.UnpublishReq) (any, error) {
	return nil, do(ctx, ss.m, func(s *state) error {
		rng, err := rangeKey(b.Range, b.Job)
		if err != nil {
			return err
		}
		return ss.pub.unpublish(rng, procRef{b.Job, b.Rank}, b.Keys)
	})
}
