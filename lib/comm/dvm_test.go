package comm_test

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

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes (see
// internal/dvmtest); the application is internal/commapp, built once per
// run into a directory TestMain removes.

var (
	appOnce sync.Once
	appPath string
	appErr  error
	appDir  string
)

func TestMain(m *testing.M) {
	if dvmtest.IsDaemon() {
		os.Exit(dvmtest.DaemonMain(os.Args[1:]))
	}
	code := m.Run()
	if appDir != "" {
		os.RemoveAll(appDir)
	}
	os.Exit(code)
}

func testApp(t testing.TB) string {
	t.Helper()
	appOnce.Do(func() {
		appDir, appErr = os.MkdirTemp("", "dynrt-commapp-")
		if appErr != nil {
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			appErr = err
			return
		}
		appPath = filepath.Join(appDir, "commapp")
		args := []string{"build", "-o", appPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command(goBin, append(args, "github.com/dynrt/dynrt/lib/comm/internal/commapp")...).CombinedOutput()
		if err != nil {
			appErr = fmt.Errorf("build commapp: %v\n%s", err, out)
		}
	})
	if appErr != nil {
		t.Fatal(appErr)
	}
	return appPath
}

// testDVM is a DVM of virtual nodes that collects the output of its jobs.
type testDVM struct {
	t   testing.TB
	c   *tool.Client
	env []string
	app string

	mu      sync.Mutex
	out     map[string][]wire.OutputLine
	changed chan struct{} // closed and replaced on every line
}

func startDVM(t testing.TB, nodes, slots int) *testDVM {
	t.Helper()
	app := testApp(t)
	dvm := dvmtest.Start(t, dvmtest.Options{Nodes: nodes, Slots: slots, KillGrace: 300 * time.Millisecond})
	d := &testDVM{t: t, env: dvm.Env, app: app, out: map[string][]wire.OutputLine{}, changed: make(chan struct{})}
	d.c = dvm.Attach(t)
	d.c.OnOutput(func(l wire.OutputLine) {
		d.mu.Lock()
		d.out[l.Job] = append(d.out[l.Job], l)
		close(d.changed)
		d.changed = make(chan struct{})
		d.mu.Unlock()
	})
	return d
}

func (d *testDVM) launch(n int, mapBy string, args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{d.app}, args...), N: uint32(n), MapBy: mapBy, Env: d.env,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch commapp %v: %v", args, err)
	}
	return rep.Job
}

// wait waits for the end of job, which must be a success, and returns its
// lines.
func (d *testDVM) wait(job string) []line {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	end, err := d.c.WaitJob(ctx, job)
	if err != nil {
		d.t.Fatalf("wait for %s: %v", job, err)
	}
	ls := d.lines(job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		for _, l := range ls {
			d.t.Logf("rank %d: %s %v", l.Rank, l.Word, l.Attrs)
		}
		d.t.Fatalf("job %s ended %s with code %d: %s", job, end.State, end.Code, end.Msg)
	}
	return ls
}

// run launches commapp and waits for its successful end.
func (d *testDVM) run(n int, mapBy string, args ...string) []line {
	d.t.Helper()
	return d.wait(d.launch(n, mapBy, args...))
}

// line is one parsed output line of commapp.
type line struct {
	Rank  uint32
	Word  string
	Attrs map[string]any
}

func (l line) num(k string) int {
	v, _ := l.Attrs[k].(float64)
	return int(v)
}

func (l line) str(k string) string {
	v, _ := l.Attrs[k].(string)
	return v
}

// lines parses the output of job; stderr and ERROR lines fail the test.
func (d *testDVM) lines(job string) []line {
	d.t.Helper()
	d.mu.Lock()
	raw := append([]wire.OutputLine(nil), d.out[job]...)
	d.mu.Unlock()
	var out []line
	for _, l := range raw {
		if l.Stream == wire.StreamStderr {
			d.t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		word, js, _ := strings.Cut(string(l.Line), " ")
		pl := line{Rank: l.Rank, Word: word, Attrs: map[string]any{}}
		if err := json.Unmarshal([]byte(js), &pl.Attrs); err != nil {
			d.t.Errorf("rank %d printed %q", l.Rank, l.Line)
			continue
		}
		if word == "ERROR" {
			d.t.Errorf("rank %d: ERROR %s", l.Rank, js)
		}
		out = append(out, pl)
	}
	return out
}

// waitFor waits, woken by every output line, until the lines of job
// satisfy ok.
func (d *testDVM) waitFor(job, what string, ok func([]line) bool) {
	d.t.Helper()
	timeout := time.NewTimer(40 * time.Second)
	defer timeout.Stop()
	for {
		d.mu.Lock()
		ch := d.changed
		d.mu.Unlock()
		ls := d.lines(job)
		if ok(ls) {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			for _, l := range ls {
				d.t.Logf("rank %d: %s %v", l.Rank, l.Word, l.Attrs)
			}
			d.t.Fatalf("job %s: timed out waiting for %s", job, what)
		}
	}
}

func only(ls []line, word string) []line {
	var out []line
	for _, l := range ls {
		if l.Word == word {
			out = append(out, l)
		}
	}
	return out
}

// request asks for a change and waits until it is settled.
func (d *testDVM) request(req wire.RCRequest) wire.RC {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req.Wait = true
	rc, err := d.c.RequestRC(ctx, req)
	if err != nil {
		d.t.Fatalf("%s %d of %s: %v", req.Type, req.N, req.Job, err)
	}
	return rc
}
