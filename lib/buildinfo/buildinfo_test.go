package buildinfo

import (
	"strings"
	"testing"
)

func TestReadHasGoVersion(t *testing.T) {
	info := Read()
	if !strings.HasPrefix(info.Go, "go") {
		t.Fatalf("Go version %q does not look like a toolchain version", info.Go)
	}
	if info.Version == "" {
		t.Fatal("empty version")
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.0.0", Go: "go1.26.8"}, "v1.0.0 (go1.26.8)"},
		{Info{Version: "(devel)", Revision: "0123456789abcdef", Go: "go1.26.8"}, "(devel) (rev 0123456789ab, go1.26.8)"},
		{Info{Version: "v1", Revision: "abc", Modified: true, Go: "go1"}, "v1 (rev abc+dirty, go1)"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("String(%+v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
