package dvmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const helloPkg = "github.com/dynrt/dynrt/internal/dvmtest/testdata/hello"

// TestPrograms builds a program, gets the same file on the second call,
// runs it, and checks that Cleanup removes it and a bad path fails.
func TestPrograms(t *testing.T) {
	p := &Programs{Race: Race}
	defer p.Cleanup()
	exe := p.Build(t, helloPkg)
	if filepath.Base(exe) != "hello" {
		t.Errorf("built %s, want a file named hello", exe)
	}
	if again := p.Build(t, helloPkg); again != exe {
		t.Errorf("second build gave %s, want %s", again, exe)
	}
	out, err := exec.Command(exe).Output()
	if err != nil || !strings.HasPrefix(string(out), "HELLO ") {
		t.Fatalf("run %s: %q, %v", exe, out, err)
	}
	if _, err := p.build(helloPkg + "/nope"); err == nil {
		t.Error("building a missing package succeeded")
	}
	p.Cleanup()
	if _, err := os.Stat(exe); !os.IsNotExist(err) {
		t.Errorf("after Cleanup, stat %s: %v", exe, err)
	}
}
