package gobuild

import (
	"slices"
	"testing"

	"github.com/dynrt/dynrt/lib/pmix"
)

// TestArgs: the flags follow the test binary's own build (go test with
// and without -tags pmix give the two rows).
func TestArgs(t *testing.T) {
	got := Args("-o", "x", ".")
	want := []string{"build", "-o", "x", "."}
	if pmix.Available() {
		want = []string{"build", "-tags", "pmix", "-o", "x", "."}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
}
