// Package leakcheck finds what a test left behind: processes carrying the
// test's mark in their environment, daemons still alive, files in a DVM
// directory. It imports nothing from the runtime, so the runtime's own
// in-package tests (lib/master) can use it as well as internal/dvmtest.
package leakcheck

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvMark is set in every process a test starts, to find leftovers.
const EnvMark = "DYNRT_TEST_MARK"

// NewMark returns a fresh random mark.
func NewMark(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// AssertClean checks that nothing a test started is left: no process
// carrying mark, none of the daemons, no file in the rendezvous directory
// dir (rendezvous file, socket directory, sockets). It kills leftover
// processes so that they do not poison the next test.
func AssertClean(t testing.TB, dir, mark string, daemons []int) {
	t.Helper()
	if left := MarkedProcs(mark); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range daemons {
		if Alive(pid) {
			t.Errorf("daemon pid %d still runs", pid)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read %s: %v", dir, err)
	}
	for _, e := range ents {
		t.Errorf("left in the DVM directory: %s", e.Name())
	}
}

// MarkedProcs lists live processes (not zombies) other than this one
// whose environment holds mark.
func MarkedProcs(mark string) []int {
	want := []byte(EnvMark + "=" + mark + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Alive reports whether pid runs. A zombie does not: pid 1 may reap
// orphans late.
func Alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || len(st) <= i+2 || st[i+2] != 'Z'
}

// WaitGone polls pid until it no longer runs or limit has passed, and
// reports whether it is gone, from its last look: looking again after the
// wait could see another process that has taken the pid meanwhile.
func WaitGone(pid int, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		if !Alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// WaitClean waits up to limit until no file is left below dir and no
// process carrying mark is alive, then fails the test for what is still
// there and kills the leftover processes. For tests whose processes take
// a moment to go (a DVM stopping in another process).
func WaitClean(t testing.TB, dir, mark string, limit time.Duration) {
	t.Helper()
	var files []string
	var procs []int
	for deadline := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		files, procs = FilesBelow(dir), MarkedProcs(mark)
		if len(files) == 0 && len(procs) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(files) > 0 {
		t.Errorf("files left in %s: %q", dir, files)
	}
	if len(procs) > 0 {
		cmds := make([]string, len(procs))
		for i, pid := range procs {
			cmds[i] = strconv.Itoa(pid) + " " + strings.Join(Cmdline(pid), " ")
			_ = syscall.Kill(pid, syscall.SIGKILL) // do not poison the next test
		}
		t.Errorf("processes left running: %q", cmds)
	}
}

// CountProg counts the live processes carrying mark whose program (the
// base name of argv[0]) is prog.
func CountProg(mark, prog string) int {
	n := 0
	for _, pid := range MarkedProcs(mark) {
		if c := Cmdline(pid); len(c) > 0 && filepath.Base(c[0]) == prog {
			n++
		}
	}
	return n
}

// Cmdline returns the arguments of pid (nil once it is gone).
func Cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
}

// FilesBelow lists the files and directories below dir, relative to it.
func FilesBelow(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}
