package dvmtest

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// Output collects, by job, the forwarded output lines of the jobs a tool
// client launched.
type Output struct {
	mu      sync.Mutex
	lines   map[string][]wire.OutputLine
	changed chan struct{} // closed and replaced on every line
}

// CollectOutput makes c deliver its jobs' output to a new Output (in place
// of c's previous output callback).
func CollectOutput(c *tool.Client) *Output {
	o := &Output{lines: map[string][]wire.OutputLine{}, changed: make(chan struct{})}
	c.OnOutput(func(l wire.OutputLine) {
		o.mu.Lock()
		o.lines[l.Job] = append(o.lines[l.Job], l)
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
	})
	return o
}

// Lines returns a copy of the lines of job so far, in arrival order.
func (o *Output) Lines(job string) []wire.OutputLine {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]wire.OutputLine(nil), o.lines[job]...)
}

// WaitFor waits until the lines of job satisfy ok, checking again at
// every new line (no polling), for at most timeout. It reports whether ok
// held.
func (o *Output) WaitFor(job string, timeout time.Duration, ok func([]wire.OutputLine) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		// Take the channel before the lines: a line arriving in between
		// closes it, so the check below cannot miss it.
		o.mu.Lock()
		ch := o.changed
		o.mu.Unlock()
		if ok(o.Lines(job)) {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// WaitJob waits at most timeout for the end of job and returns it; an
// error fails t. The job's output has all arrived when it returns (see
// tool.Client.WaitJob).
func WaitJob(t testing.TB, c *tool.Client, job string, timeout time.Duration) wire.JobInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	end, err := c.WaitJob(ctx, job)
	if err != nil {
		t.Fatalf("wait for %s: %v", job, err)
	}
	return end
}

// Line is one output line of the test programs that print `WORD {json}`
// (internal/malleable, lib/comm/internal/commapp).
type Line struct {
	Rank  uint32
	Word  string
	Attrs map[string]any
}

// Num returns attribute k as an int (0 if absent or not a number).
func (l Line) Num(k string) int {
	v, _ := l.Attrs[k].(float64)
	return int(v)
}

// Str returns attribute k as a string ("" if absent or not a string).
func (l Line) Str(k string) string {
	v, _ := l.Attrs[k].(string)
	return v
}

// ParseLines parses `WORD {json}` lines. A line on stderr (where the race
// detector reports), a line that does not parse and an ERROR line fail t;
// ERROR lines are returned too.
func ParseLines(t testing.TB, raw []wire.OutputLine) []Line {
	t.Helper()
	var out []Line
	for _, l := range raw {
		if l.Stream == wire.StreamStderr {
			t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		word, js, _ := strings.Cut(string(l.Line), " ")
		pl := Line{Rank: l.Rank, Word: word, Attrs: map[string]any{}}
		if err := json.Unmarshal([]byte(js), &pl.Attrs); err != nil {
			t.Errorf("rank %d printed %q", l.Rank, l.Line)
			continue
		}
		if word == "ERROR" {
			t.Errorf("rank %d: ERROR %s", l.Rank, js)
		}
		out = append(out, pl)
	}
	return out
}
