package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanScript starts two children, one of which leaves the shell's
// process group and session (setsid), prints their pids and waits.
const orphanScript = `sleep 300 & a=$!; setsid sleep 300 & echo "$a $!"; wait`

// hiddenScript starts a child that leaves the shell's process group and
// session and clears its environment: only a cgroup still knows where it
// came from. It prints the child's pid once the child runs sleep.
const hiddenScript = `setsid env -i sleep 300 & while [ "$(cat /proc/$!/comm 2>/dev/null)" != sleep ]; do :; done; echo "$!"; wait`

// guardedHelper is a mini daemon: a guard and one script under it
// (orphanScript; hiddenScript in group "job1" with arg "cgroup").
func guardedHelper() int {
	g, err := StartGuard()
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	script, group := orphanScript, ""
	if len(os.Args) > 1 && os.Args[1] == "cgroup" {
		script, group = hiddenScript, "job1"
	}
	pids := make(chan string, 1)
	_, err = Start(context.Background(), Spec{
		Path: "sh", Args: []string{"sh", "-c", script}, Env: os.Environ(), Guard: g, GuardGroup: group,
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

// startScript starts a shell script under g that prints pids on its first
// line, and returns them; they are killed when the test ends.
func startScript(t *testing.T, g *Guard, script, group string) (*Proc, []int) {
	t.Helper()
	lines := make(chan string, 1)
	p, err := Start(context.Background(), Spec{
		Path: "sh", Args: []string{"sh", "-c", script}, Env: os.Environ(), Guard: g, GuardGroup: group,
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
	return p, pids
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
	p, pids := startScript(t, g, orphanScript, "")
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

// startGuardCg starts a guard and skips the test if it has no cgroup v2.
func startGuardCg(t *testing.T) (*Guard, string) {
	t.Helper()
	g, err := StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := g.Cgroup()
	if err != nil {
		g.Close()
		t.Skipf("no writable cgroup v2 here (needs root or a delegated cgroup): %v", err)
	}
	return g, dir
}

// In a cgroup, a process that left its group and cleared its environment
// still dies with its job, and the job's cgroup goes away.
func TestGuardCgroupEndGroup(t *testing.T) {
	g, dir := startGuardCg(t)
	defer g.Close()
	p, hidden := startScript(t, g, hiddenScript, "job1")
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(hidden[0]) + "/cgroup")
	if !strings.Contains(string(b), "/"+filepath.Base(dir)+"/g-job1") {
		t.Errorf("the hidden child is in cgroup %q, not under %s/g-job1", b, dir)
	}
	p.Terminate(time.Second)
	if dead(hidden[0]) {
		t.Fatal("the hidden child died with the shell's group; the test proves nothing")
	}
	// The count comes from the cgroup: the hidden child has no mark for
	// the /proc sweep to find.
	if n := g.EndGroup("job1", "DYNRT_JOB"); n != 1 {
		t.Errorf("EndGroup killed %d processes, want 1 (the hidden child)", n)
	}
	waitDead(t, hidden[0])
	if _, err := os.Stat(filepath.Join(dir, "g-job1")); !os.IsNotExist(err) {
		t.Errorf("the job's cgroup is still there: %v", err)
	}
}

// After a kill -9 of the daemon, the guard kills the whole cgroup subtree
// and removes it.
func TestGuardCgroupAfterParentKill(t *testing.T) {
	g, _ := startGuardCg(t) // only to know whether cgroups work here
	g.Close()
	cmd, line, err := startHelper(t, "guarded", "cgroup")
	pids := pidsOf(t, line)
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err != nil || len(pids) != 2 {
		t.Fatalf("helper: %q %v", line, err)
	}
	own, err := ownCgroupDir()
	if err != nil {
		t.Fatal(err)
	}
	trees, _ := filepath.Glob(filepath.Join(own, "dynrt-"+strconv.Itoa(cmd.Process.Pid)+"-*", "g-job1"))
	if len(trees) != 1 {
		t.Fatalf("the helper's job cgroup: %q", trees)
	}
	tree := filepath.Dir(trees[0])
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, pid := range pids {
		waitDead(t, pid)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(tree); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard left its cgroup %s", tree)
		}
	}
}

// Guards of one process (in-process daemons of several DVMs in a test
// binary) have separate cgroups: closing one leaves the other's processes
// alone.
func TestGuardCgroupsIndependent(t *testing.T) {
	g1, dir1 := startGuardCg(t)
	defer g1.Close()
	g2, dir2 := startGuardCg(t)
	if dir1 == dir2 {
		t.Fatalf("two guards share the cgroup %s", dir1)
	}
	_, pids := startScript(t, g1, `sleep 300 & echo $!; wait`, "job1")
	startScript(t, g2, `sleep 300 & echo $!; wait`, "job1")
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if dead(pids[0]) {
		t.Error("closing one guard killed the processes of another")
	}
}

// The guard removes the directories registered with RemoveAfter once the
// daemon is done with it, except those withdrawn with Keep; it leaves
// every other directory alone, and bad paths are refused.
func TestGuardRemovesDirs(t *testing.T) {
	g, err := StartGuard()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "sub", "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	registered, kept, other := dir("registered"), dir("kept"), dir("other")
	for _, d := range []string{registered, kept} {
		if err := g.RemoveAfter(d); err != nil {
			t.Fatal(err)
		}
	}
	g.Keep(kept)
	for _, bad := range []string{"rel/dir", "/", base + "/a\nb", ""} {
		if err := g.RemoveAfter(bad); err == nil {
			t.Errorf("RemoveAfter(%q) accepted", bad)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{registered: false, kept: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", filepath.Base(d), err == nil, want)
		}
	}
	var nilGuard *Guard
	if err := nilGuard.RemoveAfter(other); err != nil {
		t.Errorf("nil guard: %v", err)
	}
	nilGuard.Keep(other)
}
