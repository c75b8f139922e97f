package launcher

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
)

// Self is what identifies the master's own host in a host list: its host
// name, its fully qualified name and the addresses of its interfaces.
type Self struct {
	Hostname string
	FQDN     string
	Ifaces   []Iface
}

// Iface is a network interface of this host and its addresses.
type Iface struct {
	Name  string
	Up    bool
	Addrs []netip.Addr
}

// IsSelf says whether the host-list entry host names this host: its host
// name, short name or FQDN (case-insensitively), localhost, a loopback
// address or an address of a local interface, or a name that resolves
// (resolved: its addresses, nil when unknown) to one of those addresses.
func (s Self) IsSelf(host string, resolved []netip.Addr) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "" {
		return false
	}
	switch h {
	case "localhost", "localhost.localdomain", "ip6-localhost":
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return s.hasAddr(a)
	}
	for _, n := range []string{s.Hostname, s.FQDN} {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		if n != "" && (h == n || h == shortName(n)) {
			return true
		}
	}
	for _, a := range resolved {
		if s.hasAddr(a) {
			return true
		}
	}
	return false
}

func (s Self) hasAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	for _, i := range s.Ifaces {
		for _, l := range i.Addrs {
			if l.Unmap() == a {
				return true
			}
		}
	}
	return false
}

func shortName(n string) string {
	short, _, _ := strings.Cut(n, ".")
	return short
}

// Name is the node name of this host when the host list does not name
// it: the host name, or "localhost" when it has none.
func (s Self) Name() string {
	if s.Hostname != "" {
		return s.Hostname
	}
	return "localhost"
}

// HostNodes turns a host list into the DVM's nodes, prterun's way: node 0
// is always the master's own host (its daemon runs in the master's
// process). It has the slots of the entries that name this host (summed,
// under the name of the first of them) and 0 slots when none does, so that
// no process is placed there unless the user listed it. Every other entry
// is a node of its own under its name as given, never renamed. hosts[i]
// is the host the daemon of node i runs on ("" for node 0).
func HostNodes(listed []alloc.Node, self Self, resolved map[string][]netip.Addr) (nodes []alloc.Node, hosts []string) {
	local := alloc.Node{Name: self.Name()}
	named := false
	nodes, hosts = []alloc.Node{{}}, []string{""}
	for _, n := range listed {
		if self.IsSelf(n.Name, resolved[n.Name]) {
			if !named {
				local.Name, named = n.Name, true
			}
			local.Slots += n.Slots
			continue
		}
		nodes = append(nodes, n)
		hosts = append(hosts, n.Name)
	}
	nodes[0] = local
	return nodes, hosts
}

// LocalSelf collects Self for this host: os.Hostname, the canonical name
// the resolver gives for it (bounded by ctx; empty when it has none) and
// the interfaces and their addresses.
func LocalSelf(ctx context.Context) Self {
	var s Self
	s.Hostname, _ = os.Hostname()
	if s.Hostname != "" {
		if cname, err := net.DefaultResolver.LookupCNAME(ctx, s.Hostname); err == nil {
			s.FQDN = strings.TrimSuffix(cname, ".")
		}
	}
	s.Ifaces = LocalIfaces()
	return s
}

// LocalIfaces lists this host's interfaces and their addresses.
func LocalIfaces() []Iface {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []Iface
	for _, ni := range ifs {
		i := Iface{Name: ni.Name, Up: ni.Flags&net.FlagUp != 0}
		addrs, _ := ni.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				i.Addrs = append(i.Addrs, p.Addr())
			}
		}
		out = append(out, i)
	}
	return out
}

// ResolveTimeout bounds the name lookups of a host list.
const ResolveTimeout = 2 * time.Second

// ResolveHosts looks up the addresses of the names among hosts that do not
// already name this host by name (IsSelf with no addresses), in parallel,
// bounded by ResolveTimeout. A name that does not resolve is left out: it
// is a remote host (ssh may know it by its own configuration).
func ResolveHosts(ctx context.Context, self Self, hosts []alloc.Node) map[string][]netip.Addr {
	ctx, cancel := context.WithTimeout(ctx, ResolveTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[string][]netip.Addr)
	for _, h := range hosts {
		if _, err := netip.ParseAddr(h.Name); err == nil || self.IsSelf(h.Name, nil) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h.Name)
			if err != nil {
				return
			}
			mu.Lock()
			out[h.Name] = addrs
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
