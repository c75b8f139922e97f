package nshosts

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
)

// capSysAdmin is the bit of CAP_SYS_ADMIN in /proc/self/status's CapEff.
const capSysAdmin = 21

// Unsupported says why clusters cannot be built here ("" when they can):
// not root, no CAP_SYS_ADMIN, or a missing program. The messages start
// with "needs root" or name the package to install.
func Unsupported(ssh bool) string {
	if os.Geteuid() != 0 {
		return "needs root: network namespaces and sshd (ip netns add, sshd -D)"
	}
	if !hasCap(capSysAdmin) {
		return "needs root with CAP_SYS_ADMIN (a privileged container): ip netns add and unshare --uts"
	}
	tools := []string{"ip", "nsenter", "unshare"}
	if ssh {
		tools = append(tools, SSHD, "ssh", "ssh-keygen")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("needs %s: install iproute2, util-linux and openssh-server (make deps-hosts)", tool)
		}
	}
	return ""
}

func hasCap(bit uint) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<bit) != 0
		}
	}
	return false
}

// Start builds a cluster for a test and tears it down in the test's
// cleanup, failing the test if anything is left. It skips the test when
// Unsupported says so. The prefix gets a random suffix (parallel tests and
// test binaries never share names), and stale clusters of cfg.Prefix from
// killed runs are reaped first.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if why := Unsupported(cfg.SSH); why != "" {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Reap(ctx, cfg.Prefix, cfg.Logger); err != nil {
		t.Logf("reaping stale clusters of %s: %v", cfg.Prefix, err)
	}
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	cfg.Prefix += "-" + hex.EncodeToString(b)
	cfg.Owner = os.Getpid()
	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("test hosts: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("tearing down test hosts %s: %v", c.Prefix(), err)
		}
		for _, r := range c.Remains() {
			t.Errorf("left after tearing down test hosts: %s", r)
		}
	})
	return c
}

// Remains lists what of the cluster still exists (after Close: nothing):
// network namespaces, processes in them, UTS mounts, /etc/netns entries,
// the temporary directory, the registry entry and the subnet claim.
func (c *Cluster) Remains() []string {
	var out []string
	spaces := []string{c.plan.Bridge}
	for _, h := range c.hosts {
		spaces = append(spaces, h.NetNS)
	}
	live := netnsSet(context.Background())
	for _, ns := range spaces {
		if live[ns] {
			out = append(out, "network namespace "+ns)
		}
		if _, err := os.Stat(filepath.Join("/etc/netns", ns)); !errors.Is(err, os.ErrNotExist) {
			out = append(out, "/etc/netns/"+ns)
		}
	}
	for _, pid := range c.procsInNamespaces() {
		out = append(out, fmt.Sprintf("process %d %s", pid, strings.Join(leakcheck.Cmdline(pid), " ")))
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), c.reg+"/") {
		out = append(out, "mounts under "+c.reg)
	}
	for _, p := range []string{c.files.Dir, c.reg, filepath.Join(Registry, "subnets", strconv.Itoa(c.plan.Subnet))} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// procsInNamespaces lists the live processes in one of the cluster's
// network or UTS namespaces, by namespace identity (inode), which works
// after the names are gone.
func (c *Cluster) procsInNamespaces() []int {
	c.mu.Lock()
	ids := c.nsIDs
	c.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		for _, kind := range []string{"net", "uts"} {
			id, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", kind))
			if err == nil && ids[id] && leakcheck.Alive(pid) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
