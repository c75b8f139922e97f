package dvmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dynrt/dynrt/internal/gobuild"
)

// Programs builds the Go programs the tests of a package run, each once
// per test binary run, into one temporary directory that Cleanup removes
// (call it from TestMain, or use Main). The zero value builds without the
// race detector; set Race to dvmtest.Race to build like the test binary.
// Build is safe for concurrent use.
type Programs struct {
	Race bool // build with -race

	mu     sync.Mutex
	dir    string
	builds map[string]*build // by import path
	names  map[string]bool   // file names taken in dir
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Build builds the program of importPath (once; later calls return the
// same file) and returns the path of the executable, named after the last
// element of importPath. A build error fails t.
func (p *Programs) Build(t testing.TB, importPath string) string {
	t.Helper()
	p.mu.Lock()
	if p.builds == nil {
		p.builds, p.names = map[string]*build{}, map[string]bool{}
	}
	b := p.builds[importPath]
	if b == nil {
		b = &build{}
		p.builds[importPath] = b
	}
	p.mu.Unlock()
	b.once.Do(func() { b.path, b.err = p.build(importPath) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (p *Programs) build(importPath string) (string, error) {
	p.mu.Lock()
	if err := p.makeDir(); err != nil {
		p.mu.Unlock()
		return "", err
	}
	// Two import paths may end alike (cmd/x, internal/x): the second
	// gets a suffix rather than overwriting the first.
	name := path.Base(importPath)
	for i := 2; p.names[name]; i++ {
		name = fmt.Sprintf("%s-%d", path.Base(importPath), i)
	}
	p.names[name] = true
	exe := filepath.Join(p.dir, name)
	p.mu.Unlock()

	goBin, err := goTool()
	if err != nil {
		return "", err
	}
	args := gobuild.Args("-o", exe)
	if p.Race {
		args = append(args, "-race")
	}
	out, err := exec.Command(goBin, append(args, importPath)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", importPath, err, out)
	}
	return exe, nil
}

// goTool finds the go command: on $PATH, else under $GOROOT (go test
// sets it even when go itself was run by its full path).
// makeDir creates the temp dir of the programs if needed; p.mu is held.
func (p *Programs) makeDir() error {
	if p.dir != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "dynrt-progs-")
	if err != nil {
		return err
	}
	p.dir = dir
	return nil
}

func goTool() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		return filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	return goBin, err
}

// Cleanup removes every program built; a later Build builds afresh.
func (p *Programs) Cleanup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
	p.dir, p.builds, p.names = "", nil, nil
}

// Main is TestMain for a package whose tests start DVMs: in a test binary
// re-executed as a node daemon it runs the daemon; otherwise it runs the
// tests, removes what progs built (progs may be nil) and exits with the
// tests' code.
func Main(m *testing.M, progs *Programs) {
	if IsDaemon() {
		os.Exit(DaemonMain(os.Args[1:]))
	}
	code := m.Run()
	if progs != nil {
		progs.Cleanup()
	}
	os.Exit(code)
}
