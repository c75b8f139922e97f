package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/proc"
)

// A second daemon for a node that is up is refused by the master and must
// leave the live daemon's socket alone: its processes (and tools) still
// reach it afterwards.
func TestRejoinLiveNodeKeepsSocket(t *testing.T) {
	dir := dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1")
	info, err := dvmdir.Read(dvmdir.File(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, id, "node1.sock")
	// The daemon renames its socket to the node's name right after the
	// master admits it, which can be just after `dvm start` returned.
	waitFor(t, "node1's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	before, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runBin(t, "daemon", "--master", info.Socket, "--node", "node1", "--slots", "1", "--dvm", id)
	if code == 0 || !strings.Contains(errOut, "already has a daemon") {
		t.Fatalf("second daemon for node1: exit %d, stderr %q", code, errOut)
	}
	after, err := os.Stat(sock)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("node1's socket after the refused rejoin: %v (same file: %v)", err, err == nil && os.SameFile(before, after))
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("connect to the live daemon: %v", err)
	}
	c.Close()
	entries, _ := os.ReadDir(filepath.Join(dir, id))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".j") {
			t.Errorf("refused daemon left its temporary socket %s", e.Name())
		}
	}
	if code, out, errOut := runBin(t, "--dvm", id, "-n", "2", "--map-by", "node", "sh", "-c", `echo "$DYNRT_NODE"`); code != 0 || !strings.Contains(out, "node1") {
		t.Errorf("job after the refused rejoin: exit %d, %q %q", code, out, errOut)
	}
}

// rewriteInfo edits the rendezvous file of DVM id in place (as a raw JSON
// object, so that fields can be dropped).
func rewriteInfo(t *testing.T, dir, id string, edit func(map[string]any)) {
	t.Helper()
	p := dvmdir.File(dir, id)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A live DVM whose rendezvous file names a dead pid is still live: its
// master answers on its socket. dvm list must keep it, and every tool can
// still use it.
func TestStaleCheckKeepsLiveDVM(t *testing.T) {
	dir := dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1")
	// The daemon renames its socket to the node's name right after the
	// master admits it, which can be just after `dvm start` returned.
	waitFor(t, "node1's socket", func() bool { _, err := os.Stat(filepath.Join(dir, id, "node1.sock")); return err == nil })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	rewriteInfo(t, dir, id, func(m map[string]any) {
		m["pid"] = dead.Process.Pid
		delete(m, "proc_start")
	})
	code, out, errOut := runBin(t, "dvm", "list")
	if code != 0 || !strings.Contains(out, id) || strings.Contains(errOut, "removed") {
		t.Errorf("dvm list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, p := range []string{dvmdir.File(dir, id), filepath.Join(dir, id, "master.sock"), filepath.Join(dir, id, "node1.sock")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after dvm list: %v", err)
		}
	}
	if code, out, errOut := runBin(t, "--dvm", id, "-n", "2", "echo", "ok"); code != 0 || out != "ok\nok\n" {
		t.Errorf("job: exit %d, %q %q", code, out, errOut)
	}
	// The stop waits for the file to go, so it needs the real pid back.
	rewriteInfo(t, dir, id, func(m map[string]any) { m["pid"] = 0 })
}

// After a master crash the next tool call cleans up the DVM's files but
// keeps its log, and says where.
func TestCrashKeepsDVMLog(t *testing.T) {
	dir := dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1")
	info, err := dvmdir.Read(dvmdir.File(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the master to die", func() bool { return syscall.Kill(info.PID, 0) != nil })
	crashLog := dvmdir.CrashLog(dir, id)
	t.Cleanup(func() { os.Remove(crashLog) }) // before assertClean (cleanups run last first)
	code, _, errOut := runBin(t, "dvm", "list")
	if code != 0 || !strings.Contains(errOut, "removed stale DVM file") || !strings.Contains(errOut, "kept in "+crashLog) {
		t.Errorf("dvm list: exit %d, stderr %q", code, errOut)
	}
	b, err := os.ReadFile(crashLog)
	if err != nil || !strings.Contains(string(b), id) {
		t.Errorf("crash log %s: %v, %q", crashLog, err, b)
	}
	if _, err := os.Stat(filepath.Join(dir, id)); !os.IsNotExist(err) {
		t.Errorf("socket directory after cleanup: %v", err)
	}
}

// DVM names are checked before anything starts; a name in use by a live
// DVM is refused. Both forms of dvm start are bounded in time, so that a
// start that wrongly succeeds fails the test instead of running on.
func TestDVMStartName(t *testing.T) {
	dynDir(t)
	startDVM(t, "--name", "taken")
	tests := []struct {
		name, why string
		code      int
	}{
		{"a\nb", "not allowed", 2},
		{strings.Repeat("x", 10000), "too long", 2},
		{"a/b", "not allowed", 2},
		{"-x", "not allowed", 2},
		{"", "empty", 2},
		{"taken", "already used by the running DVM", 1},
	}
	for _, tc := range tests {
		for _, daemonize := range []bool{true, false} {
			args := []string{"dvm", "start", "--nodes", "1", "--slots", "1", "--name", tc.name}
			if daemonize {
				args = append(args, "--daemonize")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			_ = cmd.Run()
			cancel()
			if id := strings.TrimSpace(out.String()); daemonize && cmd.ProcessState.ExitCode() == 0 && id != "" {
				runBin(t, "dvm", "stop", "--dvm", id)
			}
			code, errOut := cmd.ProcessState.ExitCode(), errb.String()
			if code != tc.code || out.Len() != 0 || !strings.Contains(errOut, tc.why) || len(errOut) > 1000 {
				t.Errorf("--name %.20q (daemonize %v): exit %d (want %d), stdout %q, stderr %.300q", tc.name, daemonize, code, tc.code, out.String(), errOut)
			}
		}
	}
}

// A rendezvous file without start_time shows no uptime rather than a
// nonsense one.
func TestDVMListWithoutStartTime(t *testing.T) {
	dir := dynDir(t)
	id := startDVM(t)
	rewriteInfo(t, dir, id, func(m map[string]any) { delete(m, "start_time") })
	code, out, errOut := runBin(t, "dvm", "list")
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("dvm list: exit %d, %q %q", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[0] == id && f[4] != "-" {
			t.Errorf("uptime of a DVM without start time: %q", line)
		}
	}
}

// orphanScript is a rank that is a shell with children of its own: when
// the rank is killed, the two sleeps are its orphans.
const orphanScript = "sleep 300 & sleep 300 & wait"

// Nothing a job started outlives a daemon or a master killed with -9: the
// rank (a shell) dies by its parent-death signal, and its children, which
// that signal does not reach, are killed by the daemon's guard process.
func TestNoOrphansAfterCrash(t *testing.T) {
	tests := []struct {
		name   string
		victim func(st statusJSON) int
	}{
		{"daemon", func(st statusJSON) int { return st.Nodes[1].PID }},
		{"master", func(st statusJSON) int { return st.PID }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := dynDir(t)
			id := startDVM(t, "--nodes", "2", "--slots", "2")
			startJob(t, "--dvm", id, "-n", "2", "--map-by", "node", "sh", "-c", orphanScript)
			waitFor(t, "4 sleep processes", func() bool { return countMarked("sleep") == 4 })
			st := dvmStatus(t, id, 2)
			victim := tc.victim(st)
			if victim <= 0 || victim == os.Getpid() {
				t.Fatalf("no %s pid in %+v", tc.name, st)
			}
			if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "every sleep to be gone", func() bool { return countMarked("sleep") == 0 && countMarked("sh") == 0 })
			if tc.name == "master" {
				// The next tool call clears the dead DVM's files.
				t.Cleanup(func() { os.Remove(dvmdir.CrashLog(dir, id)) })
				runBin(t, "dvm", "list")
			}
		})
	}
}

// pmiInitack connects to a PMI_PORT as uid (or as ourselves when uid < 0)
// with bash's /dev/tcp, sends the PMI-1 initack for id and returns what
// the daemon answered before it closed or 3 s passed.
func pmiInitack(t *testing.T, uid int, port, id string) string {
	t.Helper()
	host, p, _ := strings.Cut(port, ":")
	script := `exec 3<>/dev/tcp/` + host + `/` + p + ` || exit 1
printf 'cmd=initack pmiid=%s\n' "$1" >&3
timeout 3 cat <&3`
	cmd := exec.Command("bash", "-c", script, "bash", id)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, _ := cmd.Output()
	return string(out)
}

// With --pmi port, only the DVM owner's processes may speak PMI: a
// connection from another uid is refused even with the right PMI_ID, and
// the refusal is logged.
func TestPMIPortRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to connect as another user (uid 65534)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for its /dev/tcp")
	}
	dir := dynDir(t)
	id := startDVM(t, "--nodes", "1", "--slots", "1")
	job := exec.Command(bin, "--dvm", id, "--pmi", "port", "-n", "1", "sh", "-c", `echo "$PMI_PORT $PMI_ID"; exec sleep 300`)
	stdout, err := job.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = job.Process.Kill()
		_ = job.Wait()
		runBin(t, "dvm", "stop", "--dvm", id) // the job may run on
	})
	var port, pmiID string
	if _, err := fmt.Fscanln(stdout, &port, &pmiID); err != nil || port == "" || pmiID == "" {
		t.Fatalf("rank printed %q %q: %v", port, pmiID, err)
	}
	if got := pmiInitack(t, 65534, port, pmiID); got != "" {
		t.Errorf("uid 65534 with the right PMI_ID got an answer: %q", got)
	}
	// The id was right: the owner gets the handshake.
	if got := pmiInitack(t, -1, port, pmiID); !strings.Contains(got, "cmd=initack") || !strings.Contains(got, "rank=0") {
		t.Errorf("the owner with the right PMI_ID got %q", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, id, dvmdir.LogName))
	if !strings.Contains(string(b), "PMI_PORT connection refused") || !strings.Contains(string(b), "uid 65534") {
		t.Errorf("no refusal in the DVM log:\n%s", b)
	}
}

// A descendant that left its rank's process group dies when its job ends,
// not only when the DVM stops.
func TestNoOrphansAfterJobEnd(t *testing.T) {
	dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1")
	// The rank waits until setsid has run sleep (out of the group), then exits.
	script := `setsid sleep 300 >/dev/null 2>&1 & while [ "$(cat /proc/$!/comm 2>/dev/null)" != sleep ]; do :; done`
	if code, _, errOut := runBin(t, "--dvm", id, "-n", "2", "sh", "-c", script); code != 0 {
		t.Fatalf("job: exit %d, %q", code, errOut)
	}
	waitFor(t, "the sleeps of the ended job to be gone", func() bool { return countMarked("sleep") == 0 })
}

// dvm stop leaves nothing of a running job, not even a descendant that
// left its rank's process group.
func TestNoOrphansAfterDVMStop(t *testing.T) {
	dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1")
	script := `setsid sleep 300 >/dev/null 2>&1 & while [ "$(cat /proc/$!/comm 2>/dev/null)" != sleep ]; do :; done; exec sleep 300`
	job := exec.Command(bin, "--dvm", id, "-n", "2", "sh", "-c", script)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	jobDone := make(chan error, 1)
	go func() { jobDone <- job.Wait() }()
	t.Cleanup(func() {
		_ = job.Process.Kill()
		<-jobDone
	})
	waitFor(t, "4 sleep processes", func() bool { return countMarked("sleep") == 4 })
	if code, _, errOut := runBin(t, "dvm", "stop", "--dvm", id); code != 0 {
		t.Fatalf("dvm stop: exit %d, %q", code, errOut)
	}
	waitFor(t, "every sleep to be gone", func() bool { return countMarked("sleep") == 0 })
}

// Where cgroup v2 is writable, a descendant that left its rank's process
// group and cleared its environment still dies with its job.
func TestNoHiddenOrphansAfterJobEnd(t *testing.T) {
	if err := proc.CgroupsAvailable(); err != nil {
		t.Skipf("no writable cgroup v2 here (needs root or a delegated cgroup): %v", err)
	}
	dynDir(t)
	id := startDVM(t, "--nodes", "1", "--slots", "1")
	script := `setsid env -i sleep 300 >/dev/null 2>&1 & while [ "$(cat /proc/$!/comm 2>/dev/null)" != sleep ]; do :; done; cat /proc/$!/cgroup | grep '^0::'; echo "$!"`
	code, out, errOut := runBin(t, "--dvm", id, "-n", "1", "sh", "-c", script)
	f := strings.Fields(out)
	if code != 0 || len(f) != 2 {
		t.Fatalf("job: exit %d, %q %q", code, out, errOut)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if !strings.Contains(f[0], "/dynrt-") {
		t.Errorf("the job ran outside a cgroup of its daemon: %s", f[0])
	}
	waitFor(t, "the hidden sleep of the ended job to be gone", func() bool {
		b, err := os.ReadFile("/proc/" + f[1] + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}
