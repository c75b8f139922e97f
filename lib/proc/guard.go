package proc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dynrt/dynrt/wire"
)

// EnvGuard is set in the environment of every process started with
// Spec.Guard, to a secret of that guard; descendants inherit it.
const EnvGuard = "DYNRT_GUARD"

// envGuardWatch, in the environment of a re-executed binary, makes it run
// as a guard (see init below) watching for the mark it holds;
// envGuardCgroup gives it the cgroup subtree to kill, if any.
const (
	envGuardWatch  = "DYNRT_GUARD_WATCH"
	envGuardCgroup = "DYNRT_GUARD_CGROUP"
)

// A Guard is a small watcher process that kills what the processes
// started under it left behind once the process that started them (the
// daemon) is gone, however it ended: after a kill -9 of the daemon,
// Pdeathsig kills only its direct children, and their own children would
// live on under pid 1.
//
// The guard is the running binary re-executed (package init diverts it
// before main), in its own process group so that signals meant for the
// daemon's group do not reach it. The daemon holds the write end of a
// pipe whose read end is the guard's stdin; it tells the guard the process
// group of every process it starts and reaps. The guard sees EOF when the
// daemon has exited, for whatever reason, and then sweeps: it kills every
// registered process group and every process of the system whose
// environment carries the guard's secret mark (EnvGuard), which catches
// descendants that left their process group (setsid, double fork), round
// after round until none is left. Each marked process is opened as a pidfd
// and its environment checked again before it is signalled, so a reused
// pid is never hit.
//
// Where cgroup v2 is available and writable (see cgroups), processes are
// also started into a cgroup per group (Spec.GuardGroup: a daemon's job),
// which nothing they do can leave; the guard kills the whole subtree with
// cgroup.kill first, and skips the environment sweep when every process
// started under it went into the subtree (see Guard.outsideCgroup).
// Without cgroups, a descendant that both leaves its process group and
// clears its environment escapes the sweep.
type Guard struct {
	mark  string
	cmd   *exec.Cmd
	cg    *cgroups // nil: no cgroup v2 here
	cgErr error    // why cg is nil
	noCg  atomic.Bool
	// loose: a process was started outside the cgroup subtree (no
	// group, no cgroups, or a start into its cgroup failed): only the
	// /proc sweep can find what it leaves, so sweeps may not be skipped.
	loose atomic.Bool

	mu  sync.Mutex // serialises writes to w
	w   *os.File
	err error // first failed write: the guard is gone
}

func init() {
	if mark := os.Getenv(envGuardWatch); mark != "" {
		os.Exit(guardMain(mark, os.Getenv(envGuardCgroup), os.Stdin, os.Stderr))
	}
}

// StartGuard starts a guard for the processes the caller will start with
// Spec.Guard set to it. Close it when those processes have all been reaped.
func StartGuard() (*Guard, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, wire.Errorf(wire.ErrInternal, "proc: guard secret: %w", err)
	}
	mark := hex.EncodeToString(b[:])
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, resourceError("guard pipe", err)
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"dynrt-guard"}
	// Nothing of the caller's environment: the guard must not carry marks
	// of any kind (a test's leak mark, another guard's secret).
	cmd.Env = []string{envGuardWatch + "=" + mark, "GORACE=atexit_sleep_ms=0"}
	cg, cgErr := newCgroups(mark[:8])
	if cg != nil {
		cmd.Env = append(cmd.Env, envGuardCgroup+"="+cg.dir)
	}
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		if cg != nil {
			killCgroup(cg.dir)
		}
		return nil, execError("guard", err)
	}
	return &Guard{mark: mark, cmd: cmd, w: w, cg: cg, cgErr: cgErr}, nil
}

// Cgroup returns the guard's cgroup v2 subtree, or "" and why there is
// none.
func (g *Guard) Cgroup() (string, error) {
	if g.cg == nil || g.noCg.Load() {
		return "", g.cgErr
	}
	return g.cg.dir, nil
}

// cgroupFD returns the descriptor to start a process of group into, or -1.
func (g *Guard) cgroupFD(group string) int {
	if g == nil || g.cg == nil || group == "" || g.noCg.Load() {
		return -1
	}
	fd, err := g.cg.fd(group)
	if err != nil {
		return -1
	}
	return fd
}

// cgroupFailed turns cgroups off after a start into one failed where a
// start without succeeded.
func (g *Guard) cgroupFailed(err error) {
	if !g.noCg.Swap(true) {
		g.cgErr = fmt.Errorf("starting a process into its cgroup failed: %w", err)
	}
}

// outsideCgroup records that a process is being started outside the
// cgroup subtree: from now on the guard (and EndGroup) sweep /proc too.
func (g *Guard) outsideCgroup() {
	if !g.loose.Swap(true) {
		g.send('!', 0)
	}
}

// contained says whether every process started under g is in its cgroup
// subtree, where cgroup.kill reaches all of their descendants.
func (g *Guard) contained() bool { return g.cg != nil && !g.noCg.Load() && !g.loose.Load() }

// env is the entry that marks a process as the guard's.
func (g *Guard) env() string { return EnvGuard + "=" + g.mark }

// Pid is the guard's process id.
func (g *Guard) Pid() int { return g.cmd.Process.Pid }

func (g *Guard) send(op byte, pgid int) { g.sendLine(string(op) + strconv.Itoa(pgid)) }

func (g *Guard) sendLine(line string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil || g.err != nil {
		return
	}
	// One short line (at most PIPE_BUF) is written atomically into the
	// pipe.
	_, g.err = g.w.Write([]byte(line + "\n"))
}

// RemoveAfter has the guard remove dir (and what is in it) once the
// daemon is gone or has closed the guard, unless it called Keep(dir)
// before: a scratch directory that the
// daemon would have removed with its job (a PMIx job's
// /dev/shm/dynrt.<node>.<job>), which after a kill -9 nothing else would.
// The guard removes it after it has killed the processes that used it. An
// absolute path without a newline, at most 1024 bytes: others are refused
// with an error. It is a no-op on nil.
func (g *Guard) RemoveAfter(dir string) error {
	if g == nil {
		return nil
	}
	if err := guardPath(dir); err != nil {
		return err
	}
	g.sendLine("D" + dir)
	return nil
}

// Keep withdraws RemoveAfter(dir): the daemon has removed dir itself (a
// directory of the same name made later is not the guard's). It is a
// no-op on nil.
func (g *Guard) Keep(dir string) {
	if g != nil && guardPath(dir) == nil {
		g.sendLine("K" + dir)
	}
}

func guardPath(dir string) error {
	if !filepath.IsAbs(dir) || strings.ContainsAny(dir, "\n\x00") || len(dir) > 1024 || filepath.Clean(dir) == "/" {
		return wire.Errorf(wire.ErrInvalid, "proc: guard: %q: want an absolute directory path other than / without newlines, at most 1024 bytes", dir)
	}
	return nil
}

// Close tells the guard that the caller is done; the guard sweeps what is
// left (nothing, if every process was reaped and kept its descendants in
// its group) and exits. Close waits for it.
func (g *Guard) Close() error {
	g.mu.Lock()
	w := g.w
	g.w = nil
	g.mu.Unlock()
	if w == nil {
		return nil
	}
	w.Close()
	err := g.cmd.Wait()
	if g.cg != nil {
		g.cg.closeAll()
	}
	if err != nil {
		return wire.Errorf(wire.ErrInternal, "proc: guard: %w", err)
	}
	return nil
}

// withGuardEnv returns env with the guard's mark in place of any other
// (a process started under a nested DVM belongs to the innermost guard).
func withGuardEnv(env []string, g *Guard) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvGuard+"=") {
			out = append(out, kv)
		}
	}
	return append(out, g.env())
}

// guardMain is the guard process: it follows the registrations on in
// until EOF, then sweeps. It returns the exit status.
func guardMain(mark, cgroup string, in io.Reader, log io.Writer) int {
	// Only the daemon's exit (EOF) ends the guard: a terminal's ^C or a
	// kill of the daemon's process group must not take it away first.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	groups := make(map[int]bool)
	dirs := make(map[string]bool)
	loose := cgroup == ""
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		switch line[0] {
		case '!':
			loose = true
			continue
		case 'D':
			dirs[line[1:]] = true
			continue
		case 'K':
			delete(dirs, line[1:])
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	if cgroup != "" && strings.HasPrefix(filepath.Base(cgroup), "dynrt-") {
		// All at once. If every process went into the subtree, nothing
		// of theirs is outside it and the /proc sweep is not needed.
		if _, emptied := killCgroup(cgroup); !emptied {
			loose = true
		}
	}
	if ng, np := sweep(mark, groups, loose); ng+np > 0 {
		fmt.Fprintf(log, "dynrt-guard: the daemon (pid %d) is gone; killed %d process groups and %d processes it had started or their descendants\n", os.Getppid(), ng, np)
	}
	// After the kill: no process of the daemon's writes there any more.
	for dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(log, "dynrt-guard: the daemon is gone; removing its directory %s: %v\n", dir, err)
		}
	}
	return 0
}

// sweep kills the registered process groups, then the marked processes
// round after round until a round finds none; it returns how many groups
// and processes it signalled. One SIGKILL per group is enough: the kernel
// lets no fork complete in a group with a group signal pending. A marked
// process forking while it is killed may add a child after the scan: the
// child carries the mark and the next round gets it.
func sweep(mark string, groups map[int]bool, scan bool) (ng, np int) {
	for pgid := range groups {
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			ng++
		}
	}
	if !scan {
		return ng, 0
	}
	return ng, killAllMarked(envEntry(EnvGuard, mark))
}

// EndGroup kills every process of group (Spec.GuardGroup), now: its
// cgroup if it has one, and every process that carries the guard's mark
// and the environment entry envKey=group. It returns how many processes
// its cgroup held, or the environment sweep found. A daemon calls it when
// a job has ended (group: the job, envKey: DYNRT_JOB): descendants of the
// job's processes that left their process groups die with the job rather
// than with the daemon. When every process under g went into its cgroup,
// the cgroup holds all their descendants and the sweep through /proc
// (about 20 µs per process of the system) is skipped.
func (g *Guard) EndGroup(group, envKey string) int {
	contained := g.contained()
	n := 0
	if g.cg != nil {
		var emptied bool
		n, emptied = g.cg.end(group)
		contained = contained && emptied
	}
	if contained {
		return n
	}
	return n + killAllMarked(envEntry(EnvGuard, g.mark), envEntry(envKey, group))
}

// envEntry is the form in which an environment entry appears in
// /proc/<pid>/environ, with its terminating NUL.
func envEntry(key, value string) []byte { return []byte(key + "=" + value + "\x00") }

// killAllMarked kills the processes that carry every one of needles,
// round after round until a round finds none, and returns how many.
func killAllMarked(needles ...[]byte) int {
	seen := make(map[int]bool)
	for round := 0; round < 1000; round++ {
		found := false
		for _, pid := range marked(needles) {
			if killMarked(pid, needles) {
				found = true
				seen[pid] = true // a dying process may be seen again
			}
		}
		if !found {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return len(seen)
}

// marked lists the processes whose environment holds every one of
// needles (entries with their terminating NUL).
func marked(needles [][]byte) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	buf := make([]byte, 0, 16<<10)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if buf = readEnviron(pid, buf); hasAll(buf, needles) {
			out = append(out, pid)
		}
	}
	return out
}

func hasEnv(pid int, needles [][]byte) bool {
	return hasAll(readEnviron(pid, nil), needles)
}

// readEnviron reads /proc/<pid>/environ into buf[:0]; empty if the process
// is gone, a zombie or not ours to read. Plain system calls: the sweep
// reads every process of the system, and os.ReadFile's stat and poller
// registration would double its cost.
func readEnviron(pid int, buf []byte) []byte {
	buf = buf[:0]
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/environ", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return buf
	}
	defer syscall.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return buf
		}
		buf = buf[:len(buf)+n]
	}
}

// hasAll says whether env (NUL-separated entries) holds every one of
// needles.
func hasAll(env []byte, needles [][]byte) bool {
	if len(env) == 0 {
		return false
	}
	for _, n := range needles {
		if !bytes.HasPrefix(env, n) && !bytes.Contains(env, append([]byte{0}, n...)) {
			return false
		}
	}
	return true
}

// killMarked sends SIGKILL to pid through a pidfd, after checking that the
// process the pidfd names still carries the marks.
func killMarked(pid int, needles [][]byte) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if !hasEnv(pid, needles) {
		return false // exited, or the pid now names another process
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}
