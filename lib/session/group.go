package session

import (
	"context"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// GroupConstruct forms a group of members (ranks of the caller's job; nil
// means all of its live processes) under name. Every member must call it
// with the same name and members; all of them get the same context id,
// unique in the DVM. The name stays taken until every member has called
// GroupDestruct (or ended).
func (s *Session) GroupConstruct(ctx context.Context, name string, members []uint32) (uint64, error) {
	var procs []wire.ProcRanges
	if members != nil {
		if len(members) == 0 {
			return 0, wire.Errorf(wire.ErrInvalid, "session: group %q without members", name)
		}
		procs = []wire.ProcRanges{{Ranks: wire.RangesOf(members)}}
	}
	return s.GroupConstructProcs(ctx, name, procs)
}

// GroupConstructProcs is GroupConstruct with members of any jobs (entries
// without a job mean the caller's).
func (s *Session) GroupConstructProcs(ctx context.Context, name string, members []wire.ProcRanges) (uint64, error) {
	if strings.TrimSpace(name) == "" {
		return 0, wire.Errorf(wire.ErrInvalid, "session: group without a name")
	}
	var rep wire.GroupReply
	req := &wire.GroupReq{ID: name, Procs: members, TimeoutMS: timeoutMS(ctx, 0)}
	if err := s.call(ctx, wire.KindGroupConstruct, req, &rep); err != nil {
		return 0, err
	}
	return rep.CID, nil
}

// GroupDestruct takes the caller out of the group name. It does not wait
// for the other members.
func (s *Session) GroupDestruct(ctx context.Context, name string) error {
	return s.call(ctx, wire.KindGroupDestruct, &wire.GroupReq{ID: name}, nil)
}
