package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanScript starts two children, one of which leaves the shell's
// process group and session (setsid), prints their pids and waits.
const orphanScript = `sleep 300 & a=$!; setsid sleep 300 & echo "$a $!"; wait`

// guardedHelper is a mini daemon: a guard and one orphanScript under it.
func guardedHelper() int {
	g, err := StartGuard()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	pids := make(chan string, 1)
	_, err = Start(context.Background(), Spec{
		Path: "sh", Args: []string{"sh", "-c", orphanScript}, Env: os.Environ(), Guard: g,
		Output: func(_ int, line []byte) { pids <- string(line) },
	})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Printf("%d %s\n", g.Pid(), <-pids)
	select {}
}

// pidsOf parses a line of pids.
func pidsOf(t *testing.T, line string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("helper said %q", line)
		}
		pids = append(pids, pid)
	}
	return pids
}

// A kill -9 of the daemon leaves the rank to its parent-death signal and
// the rank's children, in its group or not, to the guard.
func TestGuardAfterParentKill(t *testing.T) {
	cmd, line, err := startHelper(t, "guarded")
	pids := pidsOf(t, line)
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err != nil || len(pids) != 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q %v", line, err)
	}
	for _, pid := range pids {
		if dead(pid) {
			t.Fatalf("process %d not running before the daemon died", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, pid := range pids { // the guard itself exits after its sweep
		waitDead(t, pid)
	}
}

// Closing the guard sweeps descendants that left their process group
// while their process was alive, and spares unmarked processes.
func TestGuardCloseSweepsEscapees(t *testing.T) {
	g, err := StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.Process.Kill()
		other.Wait()
	})
	lines := make(chan string, 1)
	p, err := Start(context.Background(), Spec{
		Path: "sh", Args: []string{"sh", "-c", orphanScript}, Env: os.Environ(), Guard: g,
		Output: func(_ int, line []byte) { lines <- string(line) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	select {
	case l := <-lines:
		pids = pidsOf(t, l)
	case <-time.After(10 * time.Second):
		t.Fatal("no pids from the shell")
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// setsid has left the group once it runs sleep.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pids[1]) + "/comm"); string(b) == "sleep\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("setsid did not run sleep")
		}
	}
	p.Terminate(time.Second) // kills the shell's group: the setsid child escapes it
	waitDead(t, pids[0])
	if dead(pids[1]) {
		t.Fatalf("the setsid child %d died with the group; the test proves nothing", pids[1])
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pids[1])
	if dead(other.Process.Pid) {
		t.Error("the guard killed a process it did not guard")
	}
}
