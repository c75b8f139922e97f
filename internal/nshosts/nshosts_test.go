package nshosts

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testPrefix starts the names of every cluster these tests make.
const testPrefix = "dyn-nshosts-t"

func output(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// tcpProbe is a bash one-liner that connects to addr:port with a time
// limit and exits 0 when the connection was made.
func tcpProbe(addr string, port int) []string {
	return []string{"timeout", "2", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", addr, port)}
}

// TestCluster builds three hosts with sshd and checks what a test on top
// of them relies on; the subtests share the cluster.
func TestCluster(t *testing.T) {
	c := Start(t, Config{Prefix: testPrefix, K: 3, SSH: true, Env: []string{"DYN_NSHOSTS_PROBE=yes it is"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hosts := c.Hosts()
	if len(hosts) != 3 || hosts[2].Name != "h2" {
		t.Fatalf("hosts %v", hosts)
	}

	t.Run("hostnames", func(t *testing.T) {
		for _, h := range hosts {
			if got := output(t, c.Command(ctx, h.Name, "hostname")); got != h.Name {
				t.Errorf("hostname in %s: %q", h.Name, got)
			}
		}
		if got, _ := os.Hostname(); strings.HasPrefix(got, "h") && c.Host(got) != nil {
			t.Errorf("the root namespace's hostname changed to %q", got)
		}
	})

	t.Run("names resolve on every host", func(t *testing.T) {
		for _, from := range hosts {
			for _, to := range hosts {
				got := output(t, c.Command(ctx, from.Name, "getent", "hosts", to.Name))
				if f := strings.Fields(got); len(f) < 2 || f[0] != to.Addr.String() {
					t.Errorf("on %s, %s resolves to %q, want %s", from.Name, to.Name, got, to.Addr)
				}
			}
		}
	})

	t.Run("hosts reach each other", func(t *testing.T) {
		for _, from := range hosts {
			for _, to := range hosts {
				if out, err := c.Command(ctx, from.Name, tcpProbe(to.Addr.String(), 22)...).CombinedOutput(); err != nil {
					t.Errorf("%s cannot connect to %s:22: %v %s", from.Name, to.Name, err, out)
				}
			}
		}
	})

	t.Run("root namespace unreachable", func(t *testing.T) {
		// A listener on every address of the root namespace; no host
		// may reach any of them.
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				t.Errorf("a connection reached the root namespace from %s", conn.RemoteAddr())
				conn.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		tried := 0
		for _, a := range addrs {
			ip, ok := a.(*net.IPNet)
			if !ok || ip.IP.To4() == nil {
				continue
			}
			tried++
			if out, err := c.Command(ctx, "h0", tcpProbe(ip.IP.String(), port)...).CombinedOutput(); err == nil {
				t.Errorf("h0 connected to the root namespace's %s:%d: %s", ip.IP, port, out)
			}
		}
		if tried == 0 {
			t.Fatal("the root namespace has no IPv4 address to try")
		}
		// The hosts' only route is the cluster's /24.
		routes := output(t, c.Command(ctx, "h1", "ip", "-4", "route", "show"))
		if want := c.Network().String() + " dev " + HostIf; !strings.HasPrefix(routes, want) || strings.Count(routes, "\n") != 0 {
			t.Errorf("routes of h1:\n%s\nwant only %s ...", routes, want)
		}
	})

	t.Run("ssh between hosts", func(t *testing.T) {
		if got := output(t, c.SSH(ctx, "h0", "h2", "hostname")); got != "h2" {
			t.Errorf("ssh h0→h2 hostname: %q", got)
		}
		// Each host has its own rendezvous directory, and Config.Env
		// reaches the sessions.
		got := output(t, c.SSH(ctx, "h1", "h0", `echo "$DYNRT_DIR|$DYN_NSHOSTS_PROBE|$HOME"`))
		if want := c.Host("h0").Dir + "|yes it is|" + filepath.Join(c.Dir(), "home"); got != want {
			t.Errorf("session environment on h0: %q, want %q", got, want)
		}
		// The client config is usable from a host as a plain file.
		if got := output(t, c.Command(ctx, "h2", "ssh", "-F", c.SSHConfig(), "h1", "cat", "/etc/hostname", ";", "hostname")); !strings.HasSuffix(got, "h1") {
			t.Errorf("ssh h2→h1: %q", got)
		}
		// Nothing is left of a finished session.
		waitNoLeftovers(t, c, "h2")
	})

	t.Run("cut and restore", func(t *testing.T) {
		if err := c.Cut(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		if out, err := c.Command(ctx, "h0", tcpProbe(c.Host("h1").Addr.String(), 22)...).CombinedOutput(); err == nil {
			t.Errorf("h0 reached h1 with its link cut: %s", out)
		}
		if out, err := c.Command(ctx, "h0", tcpProbe(c.Host("h2").Addr.String(), 22)...).CombinedOutput(); err != nil {
			t.Errorf("cutting h1 cut h2 too: %v %s", err, out)
		}
		if err := c.Restore(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		// The bridge port needs a moment to forward again.
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := c.Command(ctx, "h0", tcpProbe(c.Host("h1").Addr.String(), 22)...).CombinedOutput()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("h0 cannot reach h1 after Restore: %v %s", err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := c.Cut(ctx, "nohost"); err == nil || !strings.Contains(err.Error(), "no host nohost") {
			t.Errorf("Cut of an unknown host: %v", err)
		}
	})
}

func waitNoLeftovers(t *testing.T, c *Cluster, host string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if left, err = c.Leftovers(context.Background(), host); err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("left running on %s: %q", host, left)
}

// TestCloseLeavesNothing leaves processes behind on the hosts (one in its
// own session, as a daemon would be) and checks that Close removes them
// with everything else, and that a second Close is harmless.
func TestCloseLeavesNothing(t *testing.T) {
	if why := Unsupported(true); why != "" {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := New(ctx, Config{Prefix: testPrefix + "-close", Hosts: []string{"a", "b"}, SSH: true, Owner: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dir, sshCfg := c.Dir(), c.SSHConfig()
	stray := c.Command(ctx, "a", "sleep", "600")
	stray.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	go stray.Wait()
	// A process left by an ssh session on b.
	if out, err := c.SSH(ctx, "a", "b", "setsid sleep 600 </dev/null >/dev/null 2>&1 &").CombinedOutput(); err != nil {
		t.Fatalf("ssh: %v %s", err, out)
	}
	left, err := c.Leftovers(ctx, "b")
	if err != nil || len(left) == 0 {
		t.Fatalf("the session's sleep does not run on b: %v %v", left, err)
	}
	if len(c.Remains()) == 0 {
		t.Fatal("Remains finds nothing of a live cluster")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if r := c.Remains(); len(r) > 0 {
		t.Errorf("left after Close: %q", r)
	}
	for _, p := range []string{dir, sshCfg, "/etc/netns/" + testPrefix + "-close-a"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists", p)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), testPrefix+"-close") {
		t.Errorf("ip netns list:\n%s", out)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestReap: a cluster whose owner died is torn down by Reap; one whose
// owner lives, and one made by hand (owner 0), are not.
func TestReap(t *testing.T) {
	if why := Unsupported(false); why != "" {
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := testPrefix + "-reap"
	owner := exec.Command("sleep", "600")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, ownerPid int) *Cluster {
		c, err := New(ctx, Config{Prefix: prefix + "-" + name, K: 1, Owner: ownerPid})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dead, live, byHand := mk("dead", owner.Process.Pid), mk("live", os.Getpid()), mk("hand", 0)
	owner.Process.Kill()
	owner.Wait()
	infos, err := List(prefix)
	if err != nil || len(infos) != 3 {
		t.Fatalf("List: %+v %v", infos, err)
	}
	for _, in := range infos {
		if want := in.Prefix == dead.Prefix(); in.Stale != want {
			t.Errorf("%s: stale %v, want %v", in.Prefix, in.Stale, want)
		}
	}
	if err := Reap(ctx, prefix, nil); err != nil {
		t.Fatalf("Reap: %v", err)
	}
	if r := dead.Remains(); len(r) > 0 {
		t.Errorf("left of the dead owner's cluster: %q", r)
	}
	for _, c := range []*Cluster{live, byHand} {
		if r := c.Remains(); len(r) == 0 {
			t.Errorf("Reap removed %s", c.Prefix())
		}
	}
	if err := Down(ctx, byHand.Prefix(), nil); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if r := byHand.Remains(); len(r) > 0 {
		t.Errorf("left after Down: %q", r)
	}
	if err := Down(ctx, byHand.Prefix(), nil); err == nil || !strings.Contains(err.Error(), "no cluster") {
		t.Errorf("Down of a cluster that is gone: %v", err)
	}
	// Two clusters at once never share a subnet.
	if live.Network() == byHand.Network() || live.Network() == dead.Network() {
		t.Errorf("subnets shared: %s %s %s", live.Network(), byHand.Network(), dead.Network())
	}
	if _, err := os.Stat(filepath.Join(Registry, "clusters", live.Prefix(), "state.json")); err != nil {
		t.Errorf("live cluster's state: %v", err)
	}
}
