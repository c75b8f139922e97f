package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Helpers of the resource change tests: the malleable program
// (internal/malleable), event-driven waits for its output, and parsing of
// its lines.

var (
	mallOnce sync.Once
	mallPath string
	mallErr  error
)

// malleableApp builds internal/malleable next to the test application
// (so TestMain removes it) and returns its path.
func malleableApp(t testing.TB) string {
	t.Helper()
	app := testApp(t)
	mallOnce.Do(func() {
		mallPath = filepath.Join(filepath.Dir(app), "malleable")
		args := []string{"build", "-o", mallPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			mallErr = err
			return
		}
		out, err := exec.Command(goBin, append(args, "github.com/dynrt/dynrt/internal/malleable")...).CombinedOutput()
		if err != nil {
			mallErr = fmt.Errorf("build malleable: %v\n%s", err, out)
		}
	})
	if mallErr != nil {
		t.Fatal(mallErr)
	}
	return mallPath
}

// rcDVM wraps a test DVM with a watcher of the output lines.
type rcDVM struct {
	*testDVM
	mall    string
	changed chan struct{} // closed and replaced on every output line (guarded by d.mu)
}

func startRCDVM(t testing.TB, k, s int) *rcDVM {
	t.Helper()
	d := &rcDVM{testDVM: startDVM(t, k, s), mall: malleableApp(t), changed: make(chan struct{})}
	d.c.OnOutput(func(l wire.OutputLine) {
		d.mu.Lock()
		d.out[l.Job] = append(d.out[l.Job], l)
		close(d.changed)
		d.changed = make(chan struct{})
		d.mu.Unlock()
	})
	return d
}

// start launches n processes of the malleable program.
func (d *rcDVM) start(n int, args ...string) wire.JobLaunchReply {
	return d.startProg(d.mall, n, args...)
}

func (d *rcDVM) startProg(prog string, n int, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{prog}, args...), N: uint32(n), Env: d.env, Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch malleable %v: %v", args, err)
	}
	return rep
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func removeFile(t testing.TB, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// mline is one parsed output line.
type mline struct {
	Rank  uint32
	Word  string
	Attrs map[string]any
}

func (l mline) str(k string) string {
	v, _ := l.Attrs[k].(string)
	return v
}

func (l mline) num(k string) int {
	v, _ := l.Attrs[k].(float64)
	return int(v)
}

// mlines parses the output of job; stderr lines and ERROR lines fail the
// test.
func (d *rcDVM) mlines(job string) []mline {
	d.t.Helper()
	d.mu.Lock()
	raw := append([]wire.OutputLine(nil), d.out[job]...)
	d.mu.Unlock()
	var out []mline
	for _, l := range raw {
		if l.Stream == wire.StreamStderr {
			d.t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		word, js, _ := strings.Cut(string(l.Line), " ")
		ml := mline{Rank: l.Rank, Word: word, Attrs: map[string]any{}}
		if err := json.Unmarshal([]byte(js), &ml.Attrs); err != nil {
			d.t.Errorf("rank %d printed %q", l.Rank, l.Line)
			continue
		}
		if word == "ERROR" {
			d.t.Errorf("rank %d: ERROR %s", l.Rank, js)
		}
		out = append(out, ml)
	}
	return out
}

// waitFor waits (without polling: woken by every output line) until the
// lines of job satisfy ok.
func (d *rcDVM) waitFor(job, what string, ok func([]mline) bool) {
	d.t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		d.mu.Lock()
		ch := d.changed
		d.mu.Unlock()
		if ok(d.mlines(job)) {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			d.t.Fatalf("job %s: no %s in its output: %v", job, what, d.mlines(job))
		}
	}
}

// count returns how many lines of word there are.
func count(ls []mline, word string) int {
	n := 0
	for _, l := range ls {
		if l.Word == word {
			n++
		}
	}
	return n
}

// linesOf selects the lines of word about delta ("" = any).
func linesOf(ls []mline, word, delta string) []mline {
	var out []mline
	for _, l := range ls {
		if l.Word == word && (delta == "" || l.str("delta") == delta) {
			out = append(out, l)
		}
	}
	return out
}

// ranksOf lists the ranks of lines, sorted.
func ranksOf(ls []mline) wire.RankRanges {
	var rr wire.RankRanges
	for _, l := range ls {
		rr = rr.Add(l.Rank)
	}
	return rr
}

// request asks for a change and waits until it is settled.
func (d *rcDVM) request(req wire.RCRequest) (wire.RC, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req.Wait = true
	return d.c.RequestRC(ctx, req)
}

// mustRequest is request that must end FINALIZED.
func (d *rcDVM) mustRequest(req wire.RCRequest) wire.RC {
	d.t.Helper()
	rc, err := d.request(req)
	if err != nil {
		d.mu.Lock()
		for _, l := range d.out[req.Job] {
			d.t.Logf("rank %d: %s", l.Rank, l.Line)
		}
		d.mu.Unlock()
		d.t.Fatalf("%s %d of %s: %v", req.Type, req.N, req.Job, err)
	}
	if rc.Status != wire.RCFinalized || !rc.Settled {
		d.t.Fatalf("%s %d: %s settled=%v, want FINALIZED and settled", req.Type, req.N, rc.Status, rc.Settled)
	}
	return rc
}

// pset reads a set (with members) through the master.
func (d *rcDVM) pset(job, name string) wire.PsetInfo {
	d.t.Helper()
	var p wire.PsetInfo
	if err := d.c.Conn().Call(context.Background(), wire.KindPsetGet, &wire.PsetGetReq{Job: job, Name: name, Members: true}, &p); err != nil {
		d.t.Fatalf("pset.get %s: %v", name, err)
	}
	return p
}

// usedSlots returns the slots in use over the DVM.
func (d *rcDVM) usedSlots() int {
	d.t.Helper()
	st, err := d.c.State(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	n := 0
	for _, nd := range st.Nodes {
		n += int(nd.Used)
	}
	return n
}

// checkTimes checks that the steps of a settled change are in order.
func checkTimes(t testing.TB, rc wire.RC) {
	t.Helper()
	ts := rc.Times
	chain := []struct {
		name string
		at   int64
	}{{"requested", ts.Requested}, {"placed", ts.Placed}, {"defined", ts.Defined}, {"jobdata", ts.JobData}, {"announced", ts.Announced}}
	switch {
	case rc.Status == wire.RCAborted:
	case rc.Type == wire.RCAdd:
		chain = append(chain, struct {
			name string
			at   int64
		}{"launched", ts.Launched}, struct {
			name string
			at   int64
		}{"started", ts.Started})
	}
	for i := range chain {
		if chain[i].at == 0 {
			t.Errorf("%s: step %s not recorded: %+v", rc.Delta, chain[i].name, ts)
		}
		if i > 0 && chain[i].at < chain[i-1].at {
			t.Errorf("%s: %s before %s: %+v", rc.Delta, chain[i].name, chain[i-1].name, ts)
		}
	}
	if rc.Status == wire.RCFinalized {
		if ts.Accepted == 0 || ts.Finalized < ts.Accepted || ts.Accepted < ts.Announced {
			t.Errorf("%s: accept/finalize out of order: %+v", rc.Delta, ts)
		}
		if rc.Type == wire.RCAdd && ts.Confirmed != ts.Finalized {
			t.Errorf("%s: confirmed %d != finalized %d", rc.Delta, ts.Confirmed, ts.Finalized)
		}
		if rc.Type == wire.RCSub && ts.Exited < ts.Finalized {
			t.Errorf("%s: exited %d before finalized %d", rc.Delta, ts.Exited, ts.Finalized)
		}
	}
}
