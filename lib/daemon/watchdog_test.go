package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/wire"
)

// TestWatchdog: a daemon whose master stops sending heartbeats (a cut
// link, a stopped master) kills its processes and returns an error saying
// so; one whose master keeps pinging stays until it is told to go.
func TestWatchdog(t *testing.T) {
	cases := []struct {
		name     string
		ping     bool
		wantLost bool
	}{
		{"silent master", false, true},
		{"pinging master", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := dvmdir.Ensure(dir); err != nil {
				t.Fatal(err)
			}
			const hb, dead = 50 * time.Millisecond, 400 * time.Millisecond
			f, sock := startFakeMasterReply(t, dir, wire.NodeRegisterReply{Index: 1, DVM: "dvm1", HeartbeatMS: hb.Milliseconds(), DeadMS: dead.Milliseconds()})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			runErr := make(chan error, 1)
			go func() {
				runErr <- Run(ctx, Config{Master: sock, Node: "n1", Slots: 2, DVM: "dvm1", Dir: dir, KillGrace: 200 * time.Millisecond})
			}()
			var mc *wire.Conn
			select {
			case mc = <-f.conn:
			case err := <-runErr:
				t.Fatal(err)
			}
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ccancel()
			var rep wire.LaunchReply
			body := &wire.LaunchReq{
				Job: "dvm1.1", App: "a", ID: 1, Ranks: wire.Span(0, 0), Argv: []string{"sleep", "30"},
				Data: &wire.JobData{Gen: 1, ID: 1, Job: "dvm1.1", App: "a", Size: 1, Placement: []wire.Placement{{Node: "n1", Ranks: wire.Span(0, 0)}}},
			}
			if err := mc.Call(cctx, wire.KindNodeLaunch, body, &rep); err != nil || len(rep.Started) != 1 {
				t.Fatalf("launch: %+v %v", rep, err)
			}
			pid := rep.Started[0].PID
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if c.ping {
				// Ten times the silence the daemon allows, pinging all along.
				for i := range int(10 * dead / hb) {
					if err := mc.Call(cctx, wire.KindPing, &wire.Ping{Seq: uint64(i)}, nil); err != nil {
						t.Fatalf("ping %d: %v", i, err)
					}
					select {
					case err := <-runErr:
						t.Fatalf("daemon left a master that pings: %v", err)
					case <-time.After(hb):
					}
				}
				cancel()
			}
			var err error
			select {
			case err = <-runErr:
			case <-cctx.Done():
				t.Fatal("the daemon did not return")
			}
			lost := err != nil && errors.Is(err, wire.ErrTimeout) && strings.Contains(err.Error(), "no heartbeat")
			if lost != c.wantLost || (!c.wantLost && err != nil) {
				t.Fatalf("Run returned %v; want lost=%v", err, c.wantLost)
			}
			// Run returns after every process it started has been reaped.
			if syscall.Kill(pid, 0) == nil {
				t.Errorf("process %d outlived its daemon", pid)
			}
		})
	}
}
