package proc

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups is a guard's cgroup v2 subtree, where cgroup v2 is mounted and
// the caller's own cgroup is writable (root, or a delegated subtree):
// <own cgroup>/dynrt-<pid>-<tag>/g-<group>/, one child per group of processes (a
// daemon's jobs). A process started into its group's cgroup cannot leave
// it (unless it may write elsewhere in the hierarchy), whatever it does
// with its process group, session or environment, and cgroup.kill kills
// a whole subtree at once.
type cgroups struct {
	dir string

	mu  sync.Mutex
	fds map[string]int // open O_PATH descriptors of the group directories
}

// newCgroups creates the subtree <own cgroup>/dynrt-<pid>-<tag>, or says
// why there is none. The tag tells apart the guards of one process (a
// test binary runs many in-process daemons).
func newCgroups(tag string) (*cgroups, error) {
	own, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(own, fmt.Sprintf("dynrt-%d-%s", os.Getpid(), tag))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("no cgroup.kill (Linux 5.14+): %w", err)
	}
	return &cgroups{dir: dir, fds: make(map[string]int)}, nil
}

// ownCgroupDir is the directory of this process's cgroup v2.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var path string
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			path = p
		}
	}
	if path == "" {
		return "", errors.New("not in a cgroup v2 hierarchy")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs := strings.Fields(pre)
		if !ok || len(fs) < 5 || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		root, mnt := fs[3], fs[4]
		rel, ok := strings.CutPrefix(path, root)
		if root == "/" {
			rel, ok = path, true
		}
		if ok {
			return filepath.Join(mnt, rel), nil
		}
	}
	return "", errors.New("cgroup v2 is not mounted")
}

// groupName makes a group key a safe directory name.
func groupName(key string) string {
	return "g-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, key)
}

// fd returns a descriptor of the cgroup of group key for CLONE_INTO_CGROUP,
// creating the cgroup on first use.
func (c *cgroups) fd(key string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fd, ok := c.fds[key]; ok {
		return fd, nil
	}
	dir := filepath.Join(c.dir, groupName(key))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return -1, err
	}
	fd, err := syscall.Open(dir, unix.O_PATH|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	c.fds[key] = fd
	return fd, nil
}

// end kills every process of group key and removes its cgroup. It
// returns how many processes were left in it, and whether it is now gone
// (or never was).
func (c *cgroups) end(key string) (int, bool) {
	c.mu.Lock()
	if fd, ok := c.fds[key]; ok {
		syscall.Close(fd)
		delete(c.fds, key)
	}
	c.mu.Unlock()
	return killCgroup(filepath.Join(c.dir, groupName(key)))
}

// closeAll closes the group descriptors.
func (c *cgroups) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, fd := range c.fds {
		syscall.Close(fd)
		delete(c.fds, k)
	}
}

// killCgroup kills everything in the cgroup dir and its children, waits
// (bounded) until they are gone and removes the directories. It returns
// how many processes dir itself held, and whether dir is gone now.
func killCgroup(dir string) (int, bool) {
	// The common case first: every process of the group has been
	// reaped. The kernel removes only an unpopulated cgroup without
	// children, and nothing can enter a removed one.
	switch err := syscall.Rmdir(dir); err {
	case nil, syscall.ENOENT:
		return 0, true
	}
	n := 0
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		n = strings.Count(string(b), "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		_, err := os.Stat(dir)
		return n, os.IsNotExist(err) // gone already, or never created
	}
	for deadline := time.Now().Add(5 * time.Second); populated(dir) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	// Children first: rmdir fails on a cgroup with children.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	err := syscall.Rmdir(dir)
	return n, err == nil || err == syscall.ENOENT
}

// populated reads cgroup.events: whether any process is left in the
// subtree.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "populated 1")
}

// CgroupsAvailable says whether a Guard started by this process would get
// a cgroup v2 subtree, or why not.
func CgroupsAvailable() error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	c, err := newCgroups("probe" + hex.EncodeToString(b[:]))
	if err == nil {
		os.Remove(c.dir)
	}
	return err
}
