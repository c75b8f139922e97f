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
	// Leftover scope: processes carrying mark, processes whose executable
	// is under progRoot, and children of the warm DVM's processes (dvm).
	mark     string
	progRoot string
	dvm      map[int]bool
	// dvmExe is the warm DVM's executable: a child of the DVM running it
	// is the DVM's own helper (a daemon's process guard), not a stray.
	dvmExe string
}

// run starts e and waits for it, killing its process group at the limit,
// then checks for leftovers and kills them.
func (e exec1) run(ctx context.Context) (mpichsuite.Run, time.Duration) {
	var r mpichsuite.Run
	var out bytes.Buffer
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Dir = e.dir
	cmd.Env = append(e.env, leakcheck.EnvMark+"="+e.mark)
	// One pipe for both: the order of stdout and stderr lines as with 2>&1.
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Processes left holding the pipe must not keep Wait from returning.
	cmd.WaitDelay = Grace
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.NotRun = fmt.Sprintf("could not start %s: %v", e.argv[0], err)
		return r, 0
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(e.limit)
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
	r.Leftovers = e.sweep(cmd.Process.Pid)
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
func (e exec1) sweep(pgid int) []string {
	deadline := time.Now().Add(Grace)
	for {
		left := e.find(pgid)
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

// find lists live processes (not zombies) of the test.
func (e exec1) find(pgid int) []int {
	mark := []byte(leakcheck.EnvMark + "=" + e.mark + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == self || e.dvm[pid] {
			continue
		}
		ppid, pg, state, ok := stat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", ent.Name(), "exe"))
		if e.dvm[ppid] && exe == e.dvmExe {
			continue
		}
		hit := pg == pgid || e.dvm[ppid]
		if !hit {
			if env, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ")); err == nil && bytes.Contains(env, mark) {
				hit = true
			}
		}
		if !hit && e.progRoot != "" && strings.HasPrefix(exe, e.progRoot+"/") {
			hit = true
		}
		if hit {
			out = append(out, pid)
		}
	}
	return out
}

// stat reads the parent, process group and state of pid from /proc.
func stat(pid int) (ppid, pgrp int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	// The command name may hold spaces and parentheses: fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return ppid, pgrp, f[0][0], true
}

func describe(pid int) string {
	s := strings.Join(leakcheck.Cmdline(pid), " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("pid %d %s", pid, s)
}
