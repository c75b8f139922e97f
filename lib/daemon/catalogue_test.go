package daemon

import (
	"slices"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// The direction column of the message catalogue (docs/wire.md) is exactly
// what a daemon serves: a request kind is served on client connections iff
// the catalogue says client→daemon (and node.relay, which other daemons
// send on the client socket), on the master's connection iff it says
// master→daemon (or daemon→daemon: the master passes those on).
func TestCatalogueDirectionsDaemon(t *testing.T) {
	d, err := newDaemon(Config{Node: "n", Master: "unix:/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct {
		from []string
		mux  *wire.Mux
	}{{[]string{wire.RoleClient}, d.clients}, {[]string{wire.RoleMaster, wire.RoleDaemon}, d.fromMaster}} {
		served := side.mux.Kinds()
		for _, k := range wire.Catalogue() {
			if k.Event || k.Kind == wire.KindHello {
				continue // events and the handshake are not served by a Mux
			}
			says := slices.ContainsFunc(side.from, func(r string) bool { return k.Sends(r, wire.RoleDaemon) })
			if side.mux == d.clients && k.Kind == wire.KindNodeRelay {
				says = true // from other daemons (relay.go)
			}
			if does := slices.Contains(served, k.Kind); says != does {
				t.Errorf("%s: the catalogue says %q, but a daemon serves it from %v: %v", k.Kind, k.Dir, side.from, does)
			}
		}
		for _, kind := range served {
			if _, ok := wire.LookupKind(kind); !ok {
				t.Errorf("a daemon serves %s from %v, which the catalogue does not list", kind, side.from)
			}
		}
	}
}
