package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/internal/mpichsuite"
)

// Every test run sets leakcheck.EnvMark in the launcher's environment, with
// a value of its own; both launchers forward it to the MPI processes (and
// the processes they spawn), which is how leftovers are found.

// Backstop is how long after the time limit the harness kills a launcher
// that did not end the job itself (MPIEXEC_TIMEOUT).
const Backstop = 15 * time.Second

// Grace is how long processes of a test may take to go away after its
// launcher ended before they count as left running; also the time between
// SIGTERM and SIGKILL at the time limit.
const Grace = 3 * time.Second

// exec1 is one launch of one test.
type exec1 struct {
	argv  []string
	dir   string   // working directory
	env   []string // full environment
	limit time.Duration
	// backstop: how long after limit the harness kills a launcher that
	// did not end the job itself (Backstop).
	backstop time.Duration
	// Leftover scope: processes carrying mark, processes whose executable
	// is under progRoot, and children of the warm DVM's processes (dvm).
	mark     string
	progRoot string
	dvm      map[int]bool
	// dvmExe is the warm DVM's executable: a child of the DVM running it
	// is the DVM's own helper (a daemon's process guard), not a stray.
	dvmExe string
	// netns: network namespaces ("net:[inode]") of the test's hosts; a
	// process there that started during the run is the test's, mark or
	// not (Hydra's proxies, started through sshd, carry none).
	netns map[string]bool
}

// run starts e and waits for it, killing its process group at the limit,
// then checks for leftovers and kills them.
func (e exec1) run(ctx context.Context) (mpichsuite.Run, time.Duration) {
	var r mpichsuite.Run
	var out bytes.Buffer
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Dir = e.dir
	// runtests' MPIEXEC_TIMEOUT (whole seconds): the launcher ends the job
	// at the limit itself; the test's own env= entries come after it.
	secs := int((e.limit + time.Second - 1) / time.Second)
	cmd.Env = append([]string{"MPIEXEC_TIMEOUT=" + strconv.Itoa(secs)}, e.env...)
	cmd.Env = append(cmd.Env, leakcheck.EnvMark+"="+e.mark)
	// One pipe for both: the order of stdout and stderr lines as with 2>&1.
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Processes left holding the pipe must not keep Wait from returning.
	cmd.WaitDelay = Grace
	since := uptimeTicks()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.NotRun = fmt.Sprintf("could not start %s: %v", e.argv[0], err)
		return r, 0
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(e.limit + e.backstop)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		r.TimedOut = true
		err = stopGroup(cmd.Process.Pid, done)
	case <-ctx.Done():
		err = stopGroup(cmd.Process.Pid, done)
		r.NotRun = "interrupted"
	}
	elapsed := time.Since(start)
	r.Output = out.Bytes()
	var st syscall.WaitStatus
	ok := false
	if cmd.ProcessState != nil {
		st, ok = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	switch {
	case ok && st.Signaled():
		r.Signal = int(st.Signal())
	case ok:
		r.Exit = st.ExitStatus()
	case err != nil:
		r.NotRun = fmt.Sprintf("wait for %s: %v", e.argv[0], err)
	}
	r.AtLimit = !r.TimedOut && elapsed >= e.limit
	r.Leftovers = e.sweep(cmd.Process.Pid, since)
	return r, elapsed
}

// stopGroup ends the launcher's process group: SIGTERM (a launcher then
// stops its job), SIGKILL after Grace.
func stopGroup(pgid int, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(Grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}

// sweep waits up to Grace for the test's processes to go, then kills and
// describes those left. The launcher's own process group is swept too.
func (e exec1) sweep(pgid int, since uint64) []string {
	deadline := time.Now().Add(Grace)
	for {
		left := e.find(pgid, since)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, p := range left {
				desc = append(desc, describe(p))
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			return desc
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// find lists live processes (not zombies) of the test: those carrying its
// mark, those in the launcher's process group, children of the warm DVM
// other than its own helpers, those running a program of the suite's
// build tree that started during the run and carry no other run's mark
// (other people may run the same programs at the same time), and those in
// the test's namespace hosts that started during the run.
func (e exec1) find(pgid int, since uint64) []int {
	mark := []byte(leakcheck.EnvMark + "=" + e.mark + "\x00")
	anyMark := []byte(leakcheck.EnvMark + "=")
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == self || e.dvm[pid] {
			continue
		}
		st, ok := stat(pid)
		if !ok || st.state == 'Z' || st.state == 'X' {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", ent.Name(), "exe"))
		if e.dvm[st.ppid] && exe == e.dvmExe {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		switch {
		case st.pgrp == pgid, e.dvm[st.ppid], bytes.Contains(env, mark):
		case e.progRoot != "" && strings.HasPrefix(exe, e.progRoot+"/") && st.start >= since && !bytes.Contains(env, anyMark):
		case len(e.netns) > 0 && st.start >= since && e.netns[netnsOf(pid)]:
		default:
			continue
		}
		out = append(out, pid)
	}
	return out
}

// netnsOf is pid's network namespace as /proc/<pid>/ns/net names it.
func netnsOf(pid int) string {
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	return ns
}

// procStat is what the runner reads of /proc/<pid>/stat.
type procStat struct {
	ppid, pgrp int
	state      byte
	start      uint64 // start time in clock ticks since boot
}

// stat reads pid's /proc/<pid>/stat.
func stat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: fields follow the
	// last ')', the first of them being field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	var st procStat
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	return st, true
}

func describe(pid int) string {
	s := strings.Join(leakcheck.Cmdline(pid), " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("pid %d %s", pid, s)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// uptimeTicks is the time since boot in clock ticks, rounded down.
func uptimeTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return uint64(up * clockTicks)
}
