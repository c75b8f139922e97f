package tool

import (
	"context"

	"github.com/dynrt/dynrt/wire"
)

// Process-set requests of the inspection tools (dynpset, dyntop). The
// master answers them from the job's registry; mpi://SELF and mpi://SHARED
// mean nothing to a tool.

// Psets lists the latest version of the sets of one job (req.Job is
// required), with members if req.Members.
func (c *Client) Psets(ctx context.Context, req wire.PsetListReq) ([]wire.PsetInfo, error) {
	var l wire.PsetList
	err := c.conn.Call(ctx, wire.KindPsetList, &req, &l)
	return l.Sets, err
}

// Pset describes one set of a job at req.Version (nil = latest).
func (c *Client) Pset(ctx context.Context, req wire.PsetGetReq) (wire.PsetInfo, error) {
	var in wire.PsetInfo
	err := c.conn.Call(ctx, wire.KindPsetGet, &req, &in)
	return in, err
}
