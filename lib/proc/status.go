package proc

import (
	"fmt"
	"syscall"
)

// ExitStatus is how a process ended.
type ExitStatus struct {
	// ExitCode is the code passed to exit(2) when Signal is 0; -1 when the
	// status could not be collected (another reaper took it).
	ExitCode int
	// Signal is the signal that killed the process, 0 if it exited.
	Signal syscall.Signal
	// CoreDump reports that the kernel wrote a core file.
	CoreDump bool
}

// Exited reports a normal exit (as opposed to death by signal).
func (s ExitStatus) Exited() bool { return s.Signal == 0 && s.ExitCode >= 0 }

// Success reports exit code 0.
func (s ExitStatus) Success() bool { return s.Signal == 0 && s.ExitCode == 0 }

// Code maps the status to one shell-style number: the exit code, 128+n for
// death by signal n, and 255 when the status is unknown.
func (s ExitStatus) Code() int {
	switch {
	case s.Signal != 0:
		return 128 + int(s.Signal)
	case s.ExitCode < 0:
		return 255
	}
	return s.ExitCode
}

// String reads like "exited with code 3" or "killed by signal 9 (killed)".
func (s ExitStatus) String() string {
	switch {
	case s.Signal != 0:
		core := ""
		if s.CoreDump {
			core = ", core dumped"
		}
		return fmt.Sprintf("killed by signal %d (%v%s)", int(s.Signal), s.Signal, core)
	case s.ExitCode < 0:
		return "exit status unknown"
	}
	return fmt.Sprintf("exited with code %d", s.ExitCode)
}

func statusOf(ws syscall.WaitStatus) ExitStatus {
	switch {
	case ws.Exited():
		return ExitStatus{ExitCode: ws.ExitStatus()}
	case ws.Signaled():
		return ExitStatus{Signal: ws.Signal(), CoreDump: ws.CoreDump()}
	}
	return ExitStatus{ExitCode: -1}
}
