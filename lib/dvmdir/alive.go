package dvmdir

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// system is what liveness is judged against: this host and this boot.
type system struct {
	host string
	boot string
}

func currentSystem() system {
	h, _ := os.Hostname()
	return system{host: h, boot: bootID()}
}

// deadReason says why info's master is certainly not running, or "" when it
// is (or cannot be checked: a master on another host sharing the directory).
func (s system) deadReason(i Info) string {
	if i.Host != "" && s.host != "" && i.Host != s.host {
		return ""
	}
	if i.BootID != "" && s.boot != "" && i.BootID != s.boot {
		return "written before the last reboot"
	}
	if i.PID <= 0 {
		return "no master pid recorded"
	}
	switch err := syscall.Kill(i.PID, 0); {
	case errors.Is(err, syscall.ESRCH):
		return fmt.Sprintf("master (pid %d) is gone", i.PID)
	case errors.Is(err, syscall.EPERM):
		// Our masters run as us; another user's process reused the pid.
		return fmt.Sprintf("pid %d now belongs to another user", i.PID)
	}
	start, state, err := procStat(i.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("master (pid %d) is gone", i.PID)
	case err != nil:
		return "" // cannot tell: keep it
	case state == 'Z' || state == 'X':
		return fmt.Sprintf("master (pid %d) has exited", i.PID)
	case i.ProcStart != 0 && start != i.ProcStart:
		return fmt.Sprintf("pid %d was reused by another process", i.PID)
	}
	return ""
}

// probeTimeout bounds the connection attempt of answers.
const probeTimeout = 500 * time.Millisecond

// answers reports whether something accepts connections on the master
// socket of info. The socket is looked up in the DVM's own socket
// directory, never at a path the file names, so that a file cannot make
// us probe an arbitrary socket. A master that is alive keeps the socket
// listening even while it is stopped (the kernel accepts into the
// backlog), so a refused or missing socket together with a dead pid is
// what makes a DVM dead; any other failure counts as "answers" (cannot
// tell, keep it).
func answers(dir string, info Info) bool {
	sock := filepath.Join(dir, info.ID, "master.sock")
	c, err := net.DialTimeout("unix", sock, probeTimeout)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR)
}

// procStat returns the start time (clock ticks after boot) and state of pid
// from /proc/<pid>/stat.
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may itself contain
	// spaces and parentheses, so fields are counted from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("dvmdir: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("dvmdir: malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22
	if err != nil {
		return 0, 0, fmt.Errorf("dvmdir: /proc/%d/stat: %w", pid, err)
	}
	return start, f[0][0], nil
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
