package slurmhosts

import (
	"context"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/nshosts"
)

// Start builds a Slurm cluster for a test on nshosts.Start's hosts (torn
// down in the test's cleanup, which fails the test if anything is left).
// It skips the test, saying why, when the hosts cannot be built (not root,
// programs missing) or Slurm does not start on them.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if why := Unsupported(); why != "" {
		t.Skip(why)
	}
	nc := nshosts.Start(t, nshosts.Config{Prefix: cfg.Prefix, K: cfg.K, Logger: cfg.Logger})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Setup(ctx, nc, cfg.CPUs)
	if err != nil {
		t.Skipf("Slurm cannot start on the test hosts: %v", err)
	}
	return c
}
