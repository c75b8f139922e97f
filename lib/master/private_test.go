package master

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// startPrivate starts a private one-node DVM (as a plain dynrun does).
func startPrivate(t *testing.T) (*Master, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := Start(ctx, Config{
		Dir: dir, Nodes: []alloc.Node{{Name: "node0", Slots: 2}}, Private: true, KillGrace: testGrace,
		Logger: testLogger(), Env: func(string) string { return "" },
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
	})
	return m, dir
}

// TestPrivateDVMFiles: a private DVM listens on its unix socket only and
// writes its rendezvous file in the background once asked to; StopForExit
// removes file and sockets before it returns, and the stop it leaves
// running finishes.
func TestPrivateDVMFiles(t *testing.T) {
	m, dir := startPrivate(t)
	info := m.Info()
	if info.TCP != "" || info.Socket == "" || info.Path != dvmdir.File(dir, info.ID) {
		t.Fatalf("info: tcp %q socket %q path %q", info.TCP, info.Socket, info.Path)
	}
	if _, err := os.Stat(info.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rendezvous file before PublishFile: %v", err)
	}
	m.PublishFile()
	m.PublishFile() // once is enough; a second call does nothing
	var onDisk dvmdir.Info
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		var err error
		if onDisk, err = dvmdir.Read(info.Path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rendezvous file: %v", err)
		}
	}
	if onDisk.ID != info.ID || onDisk.Socket != info.Socket || onDisk.TCP != "" {
		t.Errorf("file says %+v, master %+v", onDisk, info)
	}
	// A tool attaches through the file, as dyntop would.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tool.Dial(ctx, onDisk, tool.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	if err := m.StopForExit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{info.Path, filepath.Dir(info.Socket)} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after StopForExit: %v", p, err)
		}
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the background stop did not finish")
	}
}

// TestStopForExitBusy: with a live job, or with daemons of other nodes,
// StopForExit is a full stop: the job is killed and the DVM is down when
// it returns.
func TestStopForExitBusy(t *testing.T) {
	t.Run("live job", func(t *testing.T) {
		m, _ := startPrivate(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := tool.Dial(ctx, m.Info(), tool.Options{Name: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rep, err := c.Launch(ctx, wire.JobLaunchReq{Argv: []string{"/bin/sleep", "30"}, N: 1, Env: os.Environ()})
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan wire.JobInfo, 1)
		go func() {
			end, _ := c.WaitJob(ctx, rep.Job)
			ended <- end
		}()
		if err := m.StopForExit(ctx); err != nil {
			t.Fatal(err)
		}
		assertDone(t, m)
		if end := <-ended; end.State != wire.JobStateKilled {
			t.Errorf("job %s %d: %s; want killed by the stop", end.State, end.Code, end.Msg)
		}
	})
	t.Run("two nodes", func(t *testing.T) {
		d := startDVM(t, 2, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.m.StopForExit(ctx); err != nil {
			t.Fatal(err)
		}
		assertDone(t, d.m)
	})
}

func assertDone(t *testing.T, m *Master) {
	t.Helper()
	select {
	case <-m.Done():
	default:
		t.Error("StopForExit returned before the DVM had stopped")
	}
}

// TestPrivateDVMNeverPublished: a private DVM whose file was never asked
// for stops cleanly, and a late PublishFile writes nothing.
func TestPrivateDVMNeverPublished(t *testing.T) {
	m, dir := startPrivate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.StopForExit(ctx); err != nil {
		t.Fatal(err)
	}
	m.PublishFile()
	<-m.Done()
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("left in the directory: %v %v", ents, err)
	}
}
