package nshosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
)

// killGrace is how long processes in a namespace get between SIGTERM and
// SIGKILL at teardown.
const killGrace = 2 * time.Second

// teardown removes everything st records, in an order that never strands a
// piece: processes first (they hold namespaces and mounts), then mounts
// and namespaces, then files, the subnet claim and last the registry entry
// (so that an interrupted teardown can be redone by Reap or Down).
func teardown(ctx context.Context, reg string, st state, log *slog.Logger) error {
	var errs []error
	p := st.Plan
	var spaces []string
	for _, h := range p.Hosts {
		spaces = append(spaces, h.NetNS)
	}
	if p.Prefix != "" {
		spaces = append(spaces, p.Prefix+"-br")
	}
	existing := netnsSet(ctx)
	for _, ns := range spaces {
		if existing[ns] {
			if err := killNetNS(ctx, ns, log); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// UTS namespaces: whatever is mounted under the cluster's uts dir.
	uts := filepath.Join(reg, "uts")
	ents, _ := os.ReadDir(uts)
	for _, e := range ents {
		f := filepath.Join(uts, e.Name())
		if err := syscall.Unmount(f, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("nshosts: umount %s: %w", f, err))
		}
	}
	for _, ns := range spaces {
		if existing[ns] {
			// Deleting a host's namespace deletes its veth and so the
			// peer on the bridge.
			if err := run(ctx, "ip", "netns", "del", ns); err != nil {
				errs = append(errs, fmt.Errorf("nshosts: %w", err))
			}
		}
		if err := os.RemoveAll(filepath.Join("/etc/netns", ns)); err != nil {
			errs = append(errs, fmt.Errorf("nshosts: %w", err))
		}
	}
	if st.Dir != "" {
		if err := os.RemoveAll(st.Dir); err != nil {
			errs = append(errs, fmt.Errorf("nshosts: %w", err))
		}
	}
	if p.Subnet >= 0 && p.Prefix != "" {
		if err := releaseSubnet(p.Prefix, p.Subnet); err != nil {
			errs = append(errs, fmt.Errorf("nshosts: release subnet: %w", err))
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(reg); err != nil {
			errs = append(errs, fmt.Errorf("nshosts: %w", err))
		}
	}
	return errors.Join(errs...)
}

// killNetNS ends every process in the network namespace ns: SIGTERM, then
// SIGKILL after killGrace, then waits (bounded) until they are gone.
func killNetNS(ctx context.Context, ns string, log *slog.Logger) error {
	pids, err := NetNSPids(ctx, ns)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return nil
	}
	// Never this process (a test that entered a namespace itself).
	pids = slices.DeleteFunc(pids, func(pid int) bool { return pid == os.Getpid() })
	log.Debug("killing processes", "netns", ns, "pids", pids)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for sig, deadline := syscall.SIGTERM, time.Now().Add(killGrace); ; {
		time.Sleep(20 * time.Millisecond)
		pids, err = NetNSPids(ctx, ns)
		if err != nil {
			return err
		}
		pids = slices.DeleteFunc(pids, func(pid int) bool { return pid == os.Getpid() || !leakcheck.Alive(pid) })
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if sig == syscall.SIGKILL {
				return fmt.Errorf("nshosts: processes in %s survive SIGKILL: %v", ns, pids)
			}
			sig, deadline = syscall.SIGKILL, time.Now().Add(killGrace)
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// netnsSet returns the names of the existing network namespaces.
func netnsSet(ctx context.Context) map[string]bool {
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	set := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			set[f[0]] = true
		}
	}
	return set
}

// Info is a cluster found in the registry.
type Info struct {
	Prefix string
	Hosts  []string
	Dir    string // temporary directory; the ssh config is Dir/ssh_config
	Owner  int    // 0: made by hand
	Stale  bool   // the owner is gone (Reap removes it)
}

// List returns the clusters in the registry whose prefix is prefix or
// starts with prefix + "-" (all with prefix "").
func List(prefix string) ([]Info, error) {
	ents, err := os.ReadDir(filepath.Join(Registry, "clusters"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("nshosts: registry: %w", err)
	}
	var out []Info
	for _, e := range ents {
		name := e.Name()
		if prefix != "" && name != prefix && !strings.HasPrefix(name, prefix+"-") {
			continue
		}
		st, ok := readState(clusterDir(name))
		info := Info{Prefix: name, Dir: st.Dir, Owner: st.Owner}
		for _, h := range st.Plan.Hosts {
			info.Hosts = append(info.Hosts, h.Name)
		}
		info.Stale = stale(clusterDir(name), st, ok)
		out = append(out, info)
	}
	return out, nil
}

func readState(reg string) (state, bool) {
	var st state
	b, err := os.ReadFile(filepath.Join(reg, "state.json"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		return state{Plan: Plan{Subnet: -1}}, false
	}
	return st, true
}

// stale reports whether a registered cluster has lost its owner. A cluster
// whose state is unreadable is stale once its entry is a minute old (New
// writes the state right after making the entry).
func stale(reg string, st state, ok bool) bool {
	if !ok {
		fi, err := os.Stat(reg)
		return err == nil && time.Since(fi.ModTime()) > time.Minute
	}
	if st.Owner == 0 {
		return false
	}
	return procStart(st.Owner) != st.OwnerStart
}

// Down tears down the cluster with exactly this prefix, whoever made it.
func Down(ctx context.Context, prefix string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := clusterDir(prefix)
	if _, err := os.Stat(reg); err != nil {
		return fmt.Errorf("nshosts: no cluster %s in %s", prefix, filepath.Dir(reg))
	}
	st, _ := readState(reg)
	st.Plan.Prefix = prefix
	return teardown(ctx, reg, st, log)
}

// Reap tears down the stale clusters of prefix (see List): those left by a
// test run that was killed before its cleanup. Clusters whose owner still
// runs (parallel tests) and clusters made by hand are left alone. It also
// drops subnet claims of clusters no longer registered.
func Reap(ctx context.Context, prefix string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	infos, err := List(prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, in := range infos {
		if !in.Stale {
			continue
		}
		log.Info("reaping stale cluster", "cluster", in.Prefix, "owner", in.Owner)
		reg := clusterDir(in.Prefix)
		st, _ := readState(reg)
		st.Plan.Prefix = in.Prefix
		if err := teardown(ctx, reg, st, log); err != nil {
			errs = append(errs, err)
		}
	}
	claims, _ := os.ReadDir(filepath.Join(Registry, "subnets"))
	for _, e := range claims {
		p := filepath.Join(Registry, "subnets", e.Name())
		owner, err := os.Readlink(p)
		if err != nil || prefix != "" && owner != prefix && !strings.HasPrefix(owner, prefix+"-") {
			continue
		}
		if _, err := os.Stat(clusterDir(owner)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(p)
		}
	}
	return errors.Join(errs...)
}
