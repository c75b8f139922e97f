package session

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientImportGraph: an application that links lib/session (or
// lib/comm) gets neither the node daemon nor, under -tags pmix, libpmix:
// every process of a malleable job would otherwise load the PMIx server's
// shared libraries at each start, and 'dynrun --pmi auto' would take the
// program for a PMIx one.
func TestClientImportGraph(t *testing.T) {
	for _, tags := range []string{"", "pmix"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", "github.com/dynrt/dynrt/lib/session", "github.com/dynrt/dynrt/lib/comm").Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			switch pkg {
			case "github.com/dynrt/dynrt/lib/daemon", "github.com/dynrt/dynrt/lib/pmix", "github.com/dynrt/dynrt/lib/master":
				t.Errorf("-tags %q: lib/session or lib/comm depends on %s", tags, pkg)
			}
		}
	}
}
