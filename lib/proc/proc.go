package proc

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/dynrt/dynrt/wire"
)

// Stream numbers passed to Spec.Output.
const (
	Stdout = 1
	Stderr = 2
)

// DefaultWaitDelay is how long Wait waits, after the process was reaped, for
// its output pipes to reach EOF before cutting them.
const DefaultWaitDelay = 2 * time.Second

// ErrDone is returned by Signal once the process has been reaped.
var ErrDone = wire.Errorf(wire.ErrState, "proc: process already exited")

// Spec describes one process to start.
type Spec struct {
	// Path is the program. A name without a slash is searched in the PATH of
	// Env (a shell's default PATH if Env has none; relative entries are
	// skipped); a relative path with a slash is taken relative to Dir.
	Path string
	// Args is the complete argv, Args[0] included, passed as is (no shell).
	// Empty means {Path}.
	Args []string
	// Env is the complete environment; nil means an empty one.
	Env []string
	// Dir is the working directory; empty means the daemon's.
	Dir string
	// ExtraFiles become fds 3, 4, ... in the child (a nil entry is closed).
	// Like os/exec, their descriptors are switched to blocking mode.
	ExtraFiles []*os.File
	// Stdin feeds the child's stdin: nil means /dev/null, an *os.File is
	// passed directly, any other reader is copied through a pipe by a
	// goroutine that ends when the reader returns (after the child exits its
	// writes fail, but a Read that never returns keeps the goroutine).
	Stdin io.Reader
	// Output receives stdout and stderr line by line without the newline,
	// in order per stream; calls for one process never overlap. The slice is
	// only valid during the call. A line longer than MaxLine arrives as
	// several calls; a last line without a newline is delivered at EOF.
	// A slow Output throttles the process (its pipe fills up).
	// nil sends both streams to /dev/null.
	Output func(stream int, line []byte)
	// MaxLine caps one delivered piece; 0 means DefaultMaxLine.
	MaxLine int
	// KeepGroup leaves the rest of the process group alive when the process
	// itself exits (by default it is sent SIGKILL).
	KeepGroup bool
	// WaitDelay bounds how long output is awaited after the exit (pipes held
	// open by a descendant that left the group); 0 means DefaultWaitDelay.
	WaitDelay time.Duration
	// Guard, if set, kills what the process leaves behind should the
	// caller die (see Guard): the process gets the guard's mark in its
	// environment and its group is registered with the guard until reaped.
	Guard *Guard
	// GuardGroup names the group of processes (a daemon's job) this one
	// belongs to under Guard: Guard.EndGroup kills them together, and
	// where cgroup v2 is available they share a cgroup.
	GuardGroup string
}

// Proc is a started process. All methods are safe for concurrent use.
type Proc struct {
	pid       int
	keepGroup bool
	guard     *Guard

	mu     sync.Mutex // guards reaped against Signal: see the package doc
	reaped bool
	status ExitStatus // written before exited is closed

	exited chan struct{} // closed once the process has been reaped
	done   chan struct{} // closed once reaped and output drained

	outMu       sync.Mutex // serialises Output calls of the two streams
	readers     atomic.Int32
	readersDone chan struct{}
}

// startOpts are knobs for tests and benchmarks only.
type startOpts struct {
	noPidfd bool // wait with a blocking waitid, as on kernels without pidfd
	direct  bool // fork on the calling thread instead of the spawner
}

// Start starts a process described by spec. ctx bounds only the start (the
// wait for the spawner); the process's life is controlled with Signal and
// Terminate. Errors carry wire codes: ErrNotFound for a missing program or
// working directory, ErrPermission for a program that cannot be executed,
// ErrNoResources when the system is out of processes, fds or memory.
func Start(ctx context.Context, spec Spec) (*Proc, error) {
	return start(ctx, spec, startOpts{})
}

func start(ctx context.Context, spec Spec, opts startOpts) (p *Proc, err error) {
	if err := ctx.Err(); err != nil {
		return nil, wire.Errorf(wire.ErrCanceled, "proc: start %q: %w", spec.Path, err)
	}
	if spec.Dir != "" {
		fi, err := os.Stat(spec.Dir)
		if err == nil && !fi.IsDir() {
			return nil, wire.Errorf(wire.ErrInvalid, "proc: working directory %q is not a directory", spec.Dir)
		}
		if err != nil {
			return nil, wire.Errorf(wire.ErrNotFound, "proc: working directory: %w", err)
		}
	}
	argv0, err := lookPath(spec.Path, spec.Dir, spec.Env)
	if err != nil {
		return nil, err
	}
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
	}

	// childFDs are the child's ends, closed here once the child has them;
	// parentFiles are our ends, closed on failure only.
	var childFDs []int
	var parentFiles []*os.File
	defer func() {
		for _, fd := range childFDs {
			syscall.Close(fd)
		}
		if err != nil {
			for _, f := range parentFiles {
				f.Close()
			}
		}
	}()
	devnull := -1
	null := func() (uintptr, error) {
		if devnull < 0 {
			fd, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
			if err != nil {
				return 0, resourceError("open /dev/null", err)
			}
			devnull = fd
			childFDs = append(childFDs, fd)
		}
		return uintptr(devnull), nil
	}
	// pipe returns (read end, write end); the child's end stays a raw
	// blocking fd, ours becomes a pollable *os.File.
	pipe := func(childReads bool) (uintptr, *os.File, error) {
		var fds [2]int
		if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
			return 0, nil, resourceError("pipe", err)
		}
		child, ours := fds[1], fds[0]
		if childReads {
			child, ours = fds[0], fds[1]
		}
		childFDs = append(childFDs, child)
		if err := syscall.SetNonblock(ours, true); err != nil {
			syscall.Close(ours)
			return 0, nil, resourceError("pipe", err)
		}
		f := os.NewFile(uintptr(ours), "|proc")
		parentFiles = append(parentFiles, f)
		return uintptr(child), f, nil
	}

	files := make([]uintptr, 3+len(spec.ExtraFiles))
	var stdinW *os.File
	switch in := spec.Stdin.(type) {
	case nil:
		if files[0], err = null(); err != nil {
			return nil, err
		}
	case *os.File:
		files[0] = in.Fd()
	default:
		if files[0], stdinW, err = pipe(true); err != nil {
			return nil, err
		}
	}
	var outR [2]*os.File
	for i := range outR {
		if spec.Output == nil {
			files[1+i], err = null()
		} else {
			files[1+i], outR[i], err = pipe(false)
		}
		if err != nil {
			return nil, err
		}
	}
	for i, f := range spec.ExtraFiles {
		files[3+i] = ^uintptr(0) // -1: closed in the child
		if f != nil {
			files[3+i] = f.Fd()
		}
	}

	pidfd := -1
	// Setsid, as Hydra's proxy does for each process: a new session is
	// also a new process group (the group signals below), and with the
	// kernel's autogroup scheduling each process competes for CPU on its
	// own, not all of a node's processes as one group against everything
	// else (MPICH's disconnect_reconnect ran 3× slower than under
	// Hydra on a loaded machine).
	sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if !opts.noPidfd {
		sys.PidFD = &pidfd
	}
	env := spec.Env
	if spec.Guard != nil {
		env = withGuardEnv(env, spec.Guard)
	}
	attr := &syscall.ProcAttr{Dir: spec.Dir, Env: env, Files: files, Sys: sys}
	if fd := spec.Guard.cgroupFD(spec.GuardGroup); fd >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	} else if spec.Guard != nil {
		spec.Guard.outsideCgroup() // before the start: a crash right after it is covered
	}
	startOnce := func() (int, error) {
		if opts.direct {
			pid, _, err := syscall.StartProcess(argv0, args, attr)
			return pid, err
		}
		return spawn(ctx, argv0, args, attr)
	}
	pid, err := startOnce()
	if err != nil && sys.UseCgroupFD && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOEXEC) {
		// clone3 into the cgroup may be what failed (a cgroup v2 setup
		// that refuses it): if a start without it works, stop using it.
		sys.UseCgroupFD = false
		spec.Guard.outsideCgroup()
		first := err
		if pid, err = startOnce(); err == nil {
			spec.Guard.cgroupFailed(first)
		}
	}
	runtime.KeepAlive(spec.Stdin)
	runtime.KeepAlive(spec.ExtraFiles)
	if err != nil {
		return nil, execError(spec.Path, err)
	}

	if spec.Guard != nil {
		// A daemon dying before this line leaves the fresh process to
		// Pdeathsig and its children, if any yet, to the mark sweep.
		spec.Guard.send('+', pid)
	}
	p = &Proc{
		pid:         pid,
		keepGroup:   spec.KeepGroup,
		guard:       spec.Guard,
		exited:      make(chan struct{}),
		done:        make(chan struct{}),
		readersDone: make(chan struct{}),
	}
	maxLine := spec.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	if spec.Output != nil {
		p.readers.Store(2)
		go p.read(Stdout, outR[0], spec.Output, maxLine)
		go p.read(Stderr, outR[1], spec.Output, maxLine)
	} else {
		close(p.readersDone)
	}
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, spec.Stdin)
			stdinW.Close()
		}()
	}
	var pidf *os.File
	if pidfd >= 0 {
		if syscall.SetNonblock(pidfd, true) == nil {
			pidf = os.NewFile(uintptr(pidfd), "pidfd")
		} else {
			syscall.Close(pidfd)
		}
	}
	delay := spec.WaitDelay
	if delay <= 0 {
		delay = DefaultWaitDelay
	}
	go p.monitor(pidf, outR, stdinW, delay)
	return p, nil
}

// Pid returns the process id, which is also its process group id.
func (p *Proc) Pid() int { return p.pid }

// Done is closed when Wait would return without blocking.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait blocks until the process has been reaped and both output streams have
// been delivered, and returns how it ended. It may be called any number of
// times, from any goroutine.
func (p *Proc) Wait() ExitStatus {
	<-p.done
	return p.status
}

// Signal sends sig to the process's whole group. It returns ErrDone once the
// process has been reaped (its pid may then belong to someone else).
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return ErrDone
	}
	if err := syscall.Kill(-p.pid, sig); err != nil {
		return wire.Errorf(wire.ErrInternal, "proc: signal %v to group %d: %w", sig, p.pid, err)
	}
	return nil
}

// Terminate sends SIGTERM (and SIGCONT, so that a stopped group can act on
// it) to the group, escalates to SIGKILL if the process has not exited after
// grace, and returns its status once Wait would. Safe to call more than once
// and concurrently with Wait.
func (p *Proc) Terminate(grace time.Duration) ExitStatus {
	if p.Signal(syscall.SIGTERM) == nil {
		_ = p.Signal(syscall.SIGCONT)
		t := time.NewTimer(grace)
		select {
		case <-p.exited:
		case <-t.C:
			_ = p.Signal(syscall.SIGKILL)
		}
		t.Stop()
	}
	return p.Wait()
}

func (p *Proc) read(stream int, r *os.File, out func(int, []byte), maxLine int) {
	_ = splitLines(r, maxLine, func(line []byte) {
		p.outMu.Lock()
		defer p.outMu.Unlock()
		out(stream, line)
	})
	r.Close()
	if p.readers.Add(-1) == 0 {
		close(p.readersDone)
	}
}

// monitor waits for the exit, clears the group, reaps, then waits for the
// output readers (cutting the pipes after delay) and closes done.
func (p *Proc) monitor(pidf *os.File, pipes [2]*os.File, stdinW *os.File, delay time.Duration) {
	werr := waitExit(p.pid, pidf)
	p.mu.Lock()
	if werr == nil {
		// The leader is a zombie, so the group id is still ours.
		if !p.keepGroup {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		p.status = reap(p.pid)
	} else {
		p.status = ExitStatus{ExitCode: -1} // someone else reaped it
	}
	if p.guard != nil {
		// Unless KeepGroup, the group was just killed; either way the
		// pgid is no longer ours to have signalled.
		p.guard.send('-', p.pid)
	}
	p.reaped = true
	p.mu.Unlock()
	if pidf != nil {
		pidf.Close()
	}
	close(p.exited)
	if stdinW != nil {
		stdinW.Close()
	}
	select {
	case <-p.readersDone:
	default:
		t := time.NewTimer(delay)
		select {
		case <-p.readersDone:
		case <-t.C:
			for _, f := range pipes {
				if f != nil {
					f.Close() // unblocks the reader with os.ErrClosed
				}
			}
			<-p.readersDone
		}
		t.Stop()
	}
	close(p.done)
}

const (
	pPID   = 1 // idtype_t P_PID
	pPIDFD = 3 // idtype_t P_PIDFD
)

// waitExit returns once pid has exited, leaving it unreaped. With a pidfd
// registered in the poller it parks only the goroutine; otherwise it blocks a
// thread in waitid.
func waitExit(pid int, pidf *os.File) error {
	if pidf != nil {
		if rc, err := pidf.SyscallConn(); err == nil {
			var werr error
			err = rc.Read(func(fd uintptr) bool {
				var ok bool
				ok, werr = waitid(pPIDFD, int(fd), true)
				return ok || werr != nil
			})
			if err == nil {
				return werr
			}
			// Not pollable after all: fall back to the blocking wait.
		}
	}
	for {
		ok, err := waitid(pPID, pid, false)
		if ok || err != nil {
			return err
		}
	}
}

// waitid calls waitid(WEXITED|WNOWAIT) and reports whether a child exited.
func waitid(idtype, id int, nohang bool) (bool, error) {
	var info struct { // siginfo_t: only si_signo is read
		signo int32
		_     [124]byte
	}
	opts := syscall.WEXITED | syscall.WNOWAIT
	if nohang {
		opts |= syscall.WNOHANG
	}
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, uintptr(idtype), uintptr(id),
			uintptr(unsafe.Pointer(&info)), uintptr(opts), 0, 0)
		switch e {
		case 0:
			// With WNOHANG and nothing to report the kernel leaves si_signo 0.
			return info.signo != 0, nil
		case syscall.EINTR:
			continue
		}
		return false, e
	}
}

func reap(pid int) ExitStatus {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return ExitStatus{ExitCode: -1}
		}
		return statusOf(ws)
	}
}

// execError gives a failed fork/exec its wire code.
func execError(prog string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return wire.Errorf(wire.ErrCanceled, "proc: start %q: %w", prog, err)
		}
		return wire.Errorf(wire.ErrInternal, "proc: start %q: %w", prog, err)
	}
	switch errno {
	case syscall.ENOENT:
		return wire.Errorf(wire.ErrNotFound, "proc: start %q: %w", prog, err)
	case syscall.EACCES, syscall.EPERM:
		return wire.Errorf(wire.ErrPermission, "proc: start %q: %w", prog, err)
	case syscall.ENOEXEC:
		return wire.Errorf(wire.ErrInvalid, "proc: start %q: not an executable format: %w", prog, err)
	}
	return resourceError("start "+prog, err)
}

func resourceError(what string, err error) error {
	switch {
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM),
		errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return wire.Errorf(wire.ErrNoResources, "proc: %s: %w", what, err)
	}
	return wire.Errorf(wire.ErrInternal, "proc: %s: %w", what, err)
}
