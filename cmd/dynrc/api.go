package main

import (
	"context"

	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// rcAPI is what dynrc asks of the master. The real implementation is a
// lib/tool client; the unit tests plug in a fake, so parsing, output and
// exit codes are tested without a DVM. The methods mean what lib/tool's
// methods of the same names document.
type rcAPI interface {
	// Jobs lists the live jobs (to default --job and to resolve names).
	Jobs(ctx context.Context) ([]wire.JobInfo, error)
	// RequestRC asks for a change; without req.Wait the reply comes after
	// phase 1 (ANNOUNCED), or at once while it is queued (NULL).
	RequestRC(ctx context.Context, req wire.RCRequest) (wire.RC, error)
	// WaitQueued returns the change a queued request (the NULL answer of
	// RequestRC) became once it has started.
	WaitQueued(ctx context.Context, queued wire.RC) (wire.RC, error)
	// RC returns one change by delta name (wire.ErrNotFound if unknown).
	RC(ctx context.Context, delta string) (wire.RC, error)
	// RCs lists the changes of job ("" = every job), oldest first.
	RCs(ctx context.Context, job string) ([]wire.RC, error)
	// CancelRC aborts a change that is not FINALIZED.
	CancelRC(ctx context.Context, delta, reason string) (wire.RC, error)
	// WaitRC returns once the change has reached status, or is settled
	// for status "". It returns the record with an error matching
	// wire.ErrAborted when the change was aborted instead, wire.ErrState
	// when ABORTED was awaited and it was finalized, and a wire.ErrTimeout
	// or wire.ErrCanceled error wrapping ctx's error when ctx ends first.
	WaitRC(ctx context.Context, delta, status string) (wire.RC, error)
	Close() error
}

// toolAPI is rcAPI over an attached lib/tool client.
type toolAPI struct{ *tool.Client }

func (a toolAPI) Jobs(ctx context.Context) ([]wire.JobInfo, error) { return a.Client.Jobs(ctx, false) }

func final(status string) bool { return status == wire.RCFinalized || status == wire.RCAborted }
