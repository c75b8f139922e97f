package dvmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// C programs: libdynrt (the C library), its unit test program and
// examples/c-synthetic are built by the repository's Makefile (`make
// libdynrt`) with the system compiler, once per test binary, into the
// Programs' temp dir.

// RepoRoot is the directory of the repository's Makefile.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BuildC builds libdynrt and the C programs (make libdynrt) and returns
// the build directory: libdynrt.a, libdynrt.so, dynrt-unit, c-synthetic.
// It skips t when there is no C compiler, no make or no msgpack-c (make
// test installs libmsgpack-dev with deps-msgpack).
func (p *Programs) BuildC(t testing.TB) string {
	t.Helper()
	return p.BuildCWith(t, "")
}

// BuildCWith is BuildC with extra compiler flags (e.g. -fsanitize=thread),
// into a build directory of their own.
func (p *Programs) BuildCWith(t testing.TB, cflags string) string {
	t.Helper()
	for _, tool := range []string{"cc", "make", "ar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s to build libdynrt: %v", tool, err)
		}
	}
	if _, err := os.Stat("/usr/include/msgpack.h"); err != nil {
		if exec.Command("pkg-config", "--exists", "msgpack").Run() != nil {
			t.Skip("needs msgpack-c to build libdynrt: apt-get install libmsgpack-dev (make deps-msgpack)")
		}
	}
	p.mu.Lock()
	if p.builds == nil {
		p.builds, p.names = map[string]*build{}, map[string]bool{}
	}
	key := "make libdynrt " + cflags
	b := p.builds[key]
	if b == nil {
		b = &build{}
		p.builds[key] = b
	}
	p.mu.Unlock()
	b.once.Do(func() { b.path, b.err = p.buildC(cflags) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (p *Programs) buildC(cflags string) (string, error) {
	p.mu.Lock()
	if err := p.makeDir(); err != nil {
		p.mu.Unlock()
		return "", err
	}
	out := filepath.Join(p.dir, "c")
	for i := 2; p.names[filepath.Base(out)]; i++ {
		out = filepath.Join(p.dir, fmt.Sprintf("c-%d", i))
	}
	p.names[filepath.Base(out)] = true
	p.mu.Unlock()
	cmd := exec.Command("make", "--no-print-directory", "-C", RepoRoot(), "libdynrt", "LIBDYNRT_BUILD="+out, "CFLAGS="+cflags)
	// Not the flags of a `make test` this runs under (its jobserver's
	// descriptors are not ours).
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make libdynrt: %v\n%s", err, strings.TrimSpace(string(b)))
	}
	return out, nil
}
