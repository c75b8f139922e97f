package master

import (
	"context"
	"fmt"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Groups (group.construct/destruct, seed 001). Construct is collective
// over the members: like a fence it completes when every member has
// entered (and fails when one ends first), and then all members get the
// same context id from one DVM-wide counter, so ids never repeat. A group
// is named by its id string and member list; the name stays taken until
// every member has left it (destruct) or ended.

// group is a constructed group.
type group struct {
	name    string
	cid     uint64
	members map[procRef]bool // true while the member is in the group
	in      int              // members still in
}

// leave takes p out of the group; it reports whether the group is now
// empty.
func (gr *group) leave(p procRef) bool {
	if gr.members[p] {
		gr.members[p] = false
		gr.in--
	}
	return gr.in == 0
}

func (ss *sessState) handleGroupConstruct(ctx context.Context, _ *wire.Request, b *wire.GroupReq) (any, error) {
	if b.ID == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: group.construct without a group name")
	}
	if b.Job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: group.construct without the caller's job")
	}
	ctx, cancel := ctxTimeout(ctx, b.TimeoutMS)
	defer cancel()
	e := &gentry{who: []procRef{{b.Job, b.Rank}}}
	rep, err := ask(ctx, ss.m, func(s *state, reply func(*wire.GroupReply, error)) {
		e.finish = func(g *gather, err error) {
			if err != nil {
				reply(nil, err)
				return
			}
			reply(&wire.GroupReply{CID: g.cid}, nil)
		}
		if err := ss.groupEnter(s, b, e); err != nil {
			reply(nil, err)
		}
	})
	if err != nil && ctx.Err() != nil {
		ss.m.post(func(*state) {
			if e.g != nil {
				e.g.leave(e)
			}
		})
		return nil, fmt.Errorf("master: construct of group %q by %s: %w", b.ID, e.who[0], err)
	}
	return rep, err
}

func (ss *sessState) groupEnter(s *state, b *wire.GroupReq, e *gentry) error {
	spec, err := s.participants(b.Job, b.Procs)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("group %q", b.ID)
	me := e.who[0]
	key := b.ID + "\x00" + spec.key
	if gr := ss.groups[key]; gr != nil {
		return wire.Errorf(wire.ErrExists, "master: %s already exists (context id %d); its members must destruct it first", what, gr.cid)
	}
	g := ss.pending[key]
	parts := map[procRef]bool(nil)
	if g != nil {
		parts = g.parts
	} else {
		parts = s.members(spec)
	}
	if _, ok := parts[me]; !ok {
		return wire.Errorf(wire.ErrInvalid, "master: %s is not a member of %s (%s)", me, what, spec.key)
	}
	switch {
	case g == nil:
		if g, err = s.newGather(key, what, parts, spec.wild); err != nil {
			return err
		}
		ss.pending[key] = g
	case g.enteredAny(e.who):
		return wire.Errorf(wire.ErrExists, "master: %s is already constructing %s", me, what)
	}
	g.enter(e)
	if g.left > 0 {
		return nil
	}
	delete(ss.pending, key)
	ss.completeGroup(s, key, g)
	return nil
}

// completeGroup gives the construct g (key: name, NUL, participant list),
// whose members have all entered, its context id.
func (ss *sessState) completeGroup(s *state, key string, g *gather) {
	ss.lastCID++
	g.cid = ss.lastCID
	name, _, _ := strings.Cut(key, "\x00")
	gr := &group{name: name, cid: g.cid, members: make(map[procRef]bool, len(g.parts))}
	for p := range g.parts {
		// A member that entered and then ended is not in the group.
		if s.procLive(p) {
			gr.members[p] = true
			gr.in++
		}
	}
	if gr.in > 0 {
		ss.groups[key] = gr
	}
	g.complete()
}

func (ss *sessState) handleGroupDestruct(ctx context.Context, _ *wire.Request, b *wire.GroupReq) (any, error) {
	if b.ID == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: group.destruct without a group name")
	}
	return nil, do(ctx, ss.m, func(s *state) error { return ss.groupDestruct(s, b) })
}

// groupDestruct takes the caller out of its group named b.ID.
func (ss *sessState) groupDestruct(s *state, b *wire.GroupReq) error {
	me := procRef{b.Job, b.Rank}
	exact := ""
	if len(b.Procs) > 0 {
		spec, err := s.participants(b.Job, b.Procs)
		if err != nil {
			return err
		}
		exact = b.ID + "\x00" + spec.key
	}
	var found []string
	for key, gr := range ss.groups {
		if gr.name == b.ID && gr.members[me] && (exact == "" || key == exact) {
			found = append(found, key)
		}
	}
	switch len(found) {
	case 0:
		return wire.Errorf(wire.ErrNotFound, "master: %s is in no group %q", me, b.ID)
	case 1:
	default:
		return wire.Errorf(wire.ErrInvalid, "master: %s is in %d groups named %q; name the members to say which", me, len(found), b.ID)
	}
	if ss.groups[found[0]].leave(me) {
		delete(ss.groups, found[0])
	}
	return nil
}
