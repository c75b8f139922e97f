// Package sigstop stops a process for a test (SIGSTOP) and waits until it
// has really stopped.
package sigstop

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Stop sends SIGSTOP to pid, waits until every thread of it has stopped,
// and sends SIGCONT in the cleanup (registered first, so that it runs
// after the caller's later cleanups, such as a DVM's check for leftovers,
// have been registered: cleanups run last in, first out).
func Stop(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	Wait(t, pid)
}

// Wait waits until every thread of pid is stopped: kill returns before a
// busy process's threads have all stopped, and one still running can
// answer a request sent right after (a daemon so answered an ADD's set
// push in about 1 of 15 runs of TestRCDeathBeforeAddLaunch).
func Wait(t testing.TB, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			// The state follows the command name in parentheses.
			if i := bytes.LastIndexByte(b, ')'); err != nil || i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop", pid)
		}
	}
}
