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
	"strconv"
	"syscall"
	"testing"
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
