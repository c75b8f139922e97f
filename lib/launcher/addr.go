package launcher

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// EnvNet passes the DVM's address choice (--net) to daemons and
// processes: they publish addresses from it (docs/clusters.md).
const EnvNet = "DYNRT_NET"

// Net is an address choice: --net, a comma-separated list of networks
// (198.18.0.0/24, fd00::/64) and interface names (eth1), like Open MPI's
// btl_tcp_if_include. The zero Net allows every address.
type Net struct {
	Prefixes []netip.Prefix
	Ifaces   []string
}

// ParseNet reads a --net value ("" is the zero Net).
func ParseNet(s string) (Net, error) {
	var n Net
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			n.Prefixes = append(n.Prefixes, p.Masked())
			continue
		}
		if strings.ContainsAny(item, "/:") || strings.ContainsAny(item, " \t") {
			return Net{}, wire.Errorf(wire.ErrInvalid, "launcher: --net %q: %q is neither a network (198.18.0.0/24) nor an interface name", s, item)
		}
		n.Ifaces = append(n.Ifaces, item)
	}
	return n, nil
}

// Any says whether the choice allows every address.
func (n Net) Any() bool { return len(n.Prefixes) == 0 && len(n.Ifaces) == 0 }

func (n Net) String() string {
	var parts []string
	for _, p := range n.Prefixes {
		parts = append(parts, p.String())
	}
	return strings.Join(append(parts, n.Ifaces...), ",")
}

// Allows says whether address a of interface iface is in the choice.
func (n Net) Allows(iface string, a netip.Addr) bool {
	if n.Any() {
		return true
	}
	for _, p := range n.Prefixes {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	for _, i := range n.Ifaces {
		if i == iface {
			return true
		}
	}
	return false
}

// Pick returns the address of this host (self) that others should use to
// reach it, among the addresses n allows on interfaces that are up: an
// address the host name resolves to (hostAddrs) first, then the first
// non-loopback IPv4 address, then the first non-loopback, non-link-local
// IPv6 one, then a loopback one. It fails when n allows none.
func (n Net) Pick(self Self, hostAddrs []netip.Addr) (netip.Addr, error) {
	return n.pick(self, hostAddrs, false)
}

// pick is Pick, with only IPv4 addresses when v4.
func (n Net) pick(self Self, hostAddrs []netip.Addr, v4 bool) (netip.Addr, error) {
	var cands []netip.Addr
	for _, i := range self.Ifaces {
		if !i.Up {
			continue
		}
		for _, a := range i.Addrs {
			if n.Allows(i.Name, a) && (!v4 || a.Unmap().Is4()) {
				cands = append(cands, a.Unmap())
			}
		}
	}
	rank := func(a netip.Addr) int {
		switch {
		case a.IsLoopback():
			return 4
		case a.IsLinkLocalUnicast():
			return 3
		case a.Is6():
			return 2
		}
		return 1
	}
	best, bestRank := netip.Addr{}, 5
	for _, h := range hostAddrs {
		for _, c := range cands {
			if h.Unmap() == c && !c.IsLoopback() {
				return c, nil
			}
		}
	}
	for _, c := range cands {
		if r := rank(c); r < bestRank {
			best, bestRank = c, r
		}
	}
	if !best.IsValid() {
		return best, wire.Errorf(wire.ErrInvalid, "launcher: no address of this host (%s) is in --net %s", describeIfaces(self.Ifaces), n)
	}
	return best, nil
}

func describeIfaces(ifs []Iface) string {
	var parts []string
	for _, i := range ifs {
		var as []string
		for _, a := range i.Addrs {
			as = append(as, a.String())
		}
		parts = append(parts, fmt.Sprintf("%s: %s", i.Name, strings.Join(as, " ")))
	}
	return strings.Join(parts, "; ")
}

// PublicAddr is the address to publish for a listener bound to bound:
// bound itself when its address is concrete; for a wildcard (0.0.0.0,
// ::), port and all, with the address n.Pick chooses (IPv4 for 0.0.0.0),
// because other hosts cannot dial 0.0.0.0.
func PublicAddr(bound netip.AddrPort, n Net, self Self, hostAddrs []netip.Addr) (netip.AddrPort, error) {
	if !bound.Addr().IsUnspecified() {
		return bound, nil
	}
	a, err := n.pick(self, hostAddrs, bound.Addr().Is4())
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(a, bound.Port()), nil
}
