package daemon

import (
	"errors"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/wire"
)

// TestHelloWaitsForFork: a child of the daemon that claims a sibling rank
// still being forked is refused once the sibling's pid is known. Before,
// any child of the daemon was admitted as a process whose pid was not yet
// recorded (TestSessionQueries saw rank 2 connect as rank 3 so).
func TestHelloWaitsForFork(t *testing.T) {
	sibling := exec.Command("sleep", "30") // a child of this process, as ranks are of their daemon
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sibling.Process.Kill(); _ = sibling.Wait() })
	d := &Daemon{node: "n", live: map[procKey]*procEntry{}, log: slog.New(slog.DiscardHandler)}
	k := procKey{"j", 3}
	d.live[k] = &procEntry{} // forking: no pid yet
	go func() {
		time.Sleep(50 * time.Millisecond)
		d.mu.Lock()
		d.live[k].pid = 1 // the fork returned another process
		d.mu.Unlock()
	}()
	err := d.checkClient(&wire.Hello{Name: procenv.ClientName("j", 3)}, wire.PeerInfo{PID: sibling.Process.Pid})
	if !errors.Is(err, wire.ErrPermission) {
		t.Fatalf("a sibling claiming a rank being forked: %v, want ErrPermission", err)
	}

	// The real process is admitted once its pid is known.
	d.live[procKey{"j", 4}] = &procEntry{pid: sibling.Process.Pid}
	if err := d.checkClient(&wire.Hello{Name: procenv.ClientName("j", 4)}, wire.PeerInfo{PID: sibling.Process.Pid}); err != nil {
		t.Fatalf("the process itself: %v", err)
	}
	// A fork that failed (entry gone) refuses the claim at once.
	if err := d.checkClient(&wire.Hello{Name: procenv.ClientName("j", 9)}, wire.PeerInfo{PID: sibling.Process.Pid}); !errors.Is(err, wire.ErrPermission) {
		t.Fatalf("no such process: %v", err)
	}
}
