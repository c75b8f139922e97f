package tool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

func noEnv(string) string { return "" }

// startMaster starts a one-node DVM (its daemon runs in this process).
func startMaster(t *testing.T) (*master.Master, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := master.Start(ctx, master.Config{
		Dir: dir, Name: "tooltest", Nodes: []alloc.Node{{Name: "n0", Slots: 2}}, Env: noEnv, KillGrace: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Error(err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("left in %s: %v", dir, ents)
		}
	})
	return m, dir
}

func TestAttachNoDVM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "empty")
	_, err := tool.Attach(context.Background(), tool.Options{Dir: dir, Env: noEnv})
	if !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("attach with no DVM: %v", err)
	}
}

func TestAttachSelections(t *testing.T) {
	m, dir := startMaster(t)
	info := m.Info()
	cases := []struct {
		name string
		sel  string
		env  func(string) string
	}{
		{"only live DVM", "", noEnv},
		{"by id", info.ID, noEnv},
		{"by name", "tooltest", noEnv},
		{"from $DYNRT_DVM", "", func(k string) string {
			if k == dvmdir.EnvDVM {
				return info.ID
			}
			return ""
		}},
		{"file", "file:" + info.Path, noEnv},
		{"unix uri", "uri:unix://" + info.Socket, noEnv},
		{"tcp uri with token", "uri:tcp://" + info.TCP, func(k string) string {
			if k == dvmdir.EnvToken {
				return info.Token
			}
			return ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, err := tool.Attach(context.Background(), tool.Options{Sel: c.sel, Dir: dir, Env: c.env})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			st, err := cl.State(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.ID != info.ID || cl.Info().ID != info.ID || len(st.Nodes) != 1 || st.Nodes[0].Slots != 2 || st.Nodes[0].State != wire.NodeUp || st.PID != os.Getpid() {
				t.Errorf("state %+v, info %+v", st, cl.Info())
			}
		})
	}
	if _, err := tool.Attach(context.Background(), tool.Options{Sel: "uri:tcp://" + info.TCP, Dir: dir, Env: func(k string) string {
		if k == dvmdir.EnvToken {
			return "wrong"
		}
		return ""
	}}); !errors.Is(err, wire.ErrUnauthorized) {
		t.Errorf("wrong token: %v", err)
	}
}

func TestLaunchWaitSubscribeStop(t *testing.T) {
	m, dir := startMaster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tool.Attach(ctx, tool.Options{Dir: dir, Env: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var lines []string
	var kinds []string
	c.OnOutput(func(l wire.OutputLine) {
		mu.Lock()
		lines = append(lines, string(l.Line))
		mu.Unlock()
	})
	if _, err := c.Subscribe(ctx, wire.EventSubReq{Kinds: []string{"job."}}, func(ev wire.Event) {
		mu.Lock()
		kinds = append(kinds, ev.Kind+":"+ev.State)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{"/bin/sh", "-c", "echo hello $DYNRT_RANK; exit 3"}, N: 1, Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	end, err := c.WaitJob(ctx, rep.Job)
	if err != nil {
		t.Fatal(err)
	}
	if end.State != wire.JobStateFailed || end.Code != 3 || !strings.Contains(end.Msg, "rank 0 on n0 exited with code 3") {
		t.Errorf("end %+v", end)
	}
	mu.Lock()
	if len(lines) != 1 || lines[0] != "hello 0" { // delivered before WaitJob returned
		t.Errorf("output %q", lines)
	}
	mu.Unlock()
	jobs, err := c.Jobs(ctx, true)
	if err != nil || len(jobs) != 1 || jobs[0].Job != rep.Job || jobs[0].Code != 3 {
		t.Errorf("jobs %+v %v", jobs, err)
	}
	if err := c.StopDVM(ctx, 0); err != nil {
		t.Fatal(err)
	}
	<-m.Done()
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(kinds, ",") != "job.state:running,job.state:failed" {
		t.Errorf("events %v", kinds)
	}
}
