package master

import (
	"context"

	"github.com/dynrt/dynrt/wire"
)

// handleStdin serves job.stdin from the tool that launched the job with a
// stdin stream (dynrun --stdin 0): the loop finds the node of the rank, and
// the call to its daemon is made from this handler's goroutine. The
// daemon answers once the data is queued for the process, so a launcher
// that waits for each reply is paced by the process's reading.
func (m *Master) handleStdin(ctx context.Context, req *wire.Request, b *wire.JobStdin) (any, error) {
	conn, err := ask(ctx, m, func(s *state, reply func(*wire.Conn, error)) {
		reply(s.stdinTarget(req.Conn, b))
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	defer cancel()
	if err := conn.Call(ctx, wire.KindJobStdin, b, nil); err != nil {
		return nil, err
	}
	return nil, nil
}

// stdinTarget checks a job.stdin request and returns the connection of the
// daemon running its rank.
func (s *state) stdinTarget(from *wire.Conn, b *wire.JobStdin) (*wire.Conn, error) {
	j, err := s.job(b.Job)
	if err != nil {
		return nil, err
	}
	switch {
	case !j.req.Stdin || b.Rank != 0:
		return nil, wire.Errorf(wire.ErrInvalid, "master: rank %d of job %s was not launched with a stdin stream", b.Rank, j.ns)
	case j.owner == nil || j.owner.c != from:
		return nil, wire.Errorf(wire.ErrPermission, "master: only the launcher of job %s may send it stdin", j.ns)
	case j.done:
		return nil, wire.Errorf(wire.ErrState, "master: job %s has already ended (%s)", j.ns, j.state)
	case j.procs.at(b.Rank) == nil:
		return nil, wire.Errorf(wire.ErrNotFound, "master: job %s has no rank %d", j.ns, b.Rank)
	}
	idx := j.procs.at(b.Rank).node
	if idx < 0 || idx >= len(s.nodes) || !s.nodes[idx].up {
		return nil, wire.Errorf(wire.ErrState, "master: the node of rank %d of job %s is down", b.Rank, j.ns)
	}
	return s.nodes[idx].conn, nil
}
