package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/nshosts"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, append([]string{"nshosts"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestUpExecSSHDown drives a cluster through the command as
// scripts/nshosts.sh does: up prints shell assignments, exec and ssh run
// commands on hosts with their exit status, down removes it all.
func TestUpExecSSHDown(t *testing.T) {
	if why := nshosts.Unsupported(true); why != "" {
		t.Skip(why)
	}
	// Clusters of killed runs of this test are reaped: they belong to
	// their test process (--owner).
	if code, _, errs := run(t, "reap", "dyn-nshosts-cmd"); code != 0 {
		t.Fatalf("reap: exit %d: %s", code, errs)
	}
	prefix := fmt.Sprintf("dyn-nshosts-cmd-%d", os.Getpid()%10000)
	t.Cleanup(func() { _ = nshosts.Down(context.Background(), prefix, nil) })
	code, out, errs := run(t, "up", "--prefix", prefix, "-k", "2", "--env", "NSHOSTS_TEST=1", "--owner", strconv.Itoa(os.Getpid()))
	if code != 0 {
		t.Fatalf("up: exit %d: %s", code, errs)
	}
	for _, want := range []string{"NSHOSTS_PREFIX=" + prefix + "\n", "NSHOSTS_HOSTS='h0 h1'\n", "NSHOSTS_SSH_CONFIG=/"} {
		if !strings.Contains(out, want) {
			t.Errorf("up printed %q, want %q in it", out, want)
		}
	}
	cases := []struct {
		args []string
		code int
		out  string // stdout, trimmed
		err  string // substring of stderr
	}{
		{args: []string{"exec", "--prefix", prefix, "h1", "hostname"}, out: "h1"},
		{args: []string{"exec", "--prefix", prefix, "h0", "sh", "-c", "echo $NSHOSTS_TEST; exit 7"}, code: 7, out: "1"},
		{args: []string{"ssh", "--prefix", prefix, "h1", "hostname"}, out: "h1"},
		{args: []string{"ssh", "--prefix", prefix, "h1", "exit 3"}, code: 3},
		{args: []string{"exec", "--prefix", prefix, "h5", "true"}, code: 2, err: `no host "h5" in cluster ` + prefix + " (hosts: h0 h1)"},
		{args: []string{"exec", "--prefix", prefix + "-none", "h0", "true"}, code: 1, err: "no cluster " + prefix + "-none"},
		{args: []string{"list", prefix}, out: prefix + "\thosts h0,h1\t"},
		{args: []string{"reap", prefix}}, // its owner, this process, lives
		{args: []string{"exec", "--prefix", prefix, "h1", "true"}},
		{args: []string{"up", "--prefix", prefix + "-x", "--owner", "999999999"}, code: 2, err: "--owner 999999999: no such process"},
		{args: []string{"up", "--prefix", prefix}, code: 1, err: "a cluster with prefix " + prefix + " exists"},
		{args: []string{"up", "--prefix", "Bad"}, code: 1, err: `prefix "Bad": character 'B'`},
	}
	for _, c := range cases {
		code, out, errs := run(t, c.args...)
		if code != c.code || !strings.HasPrefix(strings.TrimSpace(out), c.out) || !strings.Contains(errs, c.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr with %q", c.args, code, out, errs, c.code, c.out, c.err)
		}
	}
	if code, _, errs := run(t, "down", "--prefix", prefix); code != 0 {
		t.Fatalf("down: exit %d: %s", code, errs)
	}
	if _, out, _ := run(t, "list", prefix); out != "" {
		t.Errorf("list after down: %q", out)
	}
	if code, _, errs := run(t, "down", "--prefix", prefix); code != 1 || !strings.Contains(errs, "no cluster "+prefix) {
		t.Errorf("second down: exit %d, %q", code, errs)
	}
}
