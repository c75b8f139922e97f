package tool

import (
	"context"

	"github.com/dynrt/dynrt/wire"
)

// Stdin sends data to the stdin of a rank of a job launched with a stdin
// stream (wire.JobLaunchReq.Stdin; only rank 0 has one); eof closes it
// after data. It returns once the data is queued on the process's node,
// so a caller that sends piece by piece is paced by the process. Only the
// connection that launched the job may send.
func (c *Client) Stdin(ctx context.Context, job string, rank uint32, data []byte, eof bool) error {
	return c.conn.Call(ctx, wire.KindJobStdin, &wire.JobStdin{Job: job, Rank: rank, Data: data, EOF: eof}, nil)
}
