package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dynrt/dynrt/internal/mpichsuite"
)

// Build is an MPICH build the suite runs against.
type Build struct {
	Name    string // ch3-pmi1, ch3-pmi2, debian
	MPICC   string // the compiler wrapper
	Mpiexec string // its mpiexec.hydra
	// Prefix is the installation prefix given to test/mpi's configure as
	// --with-mpi; empty for Debian's MPICH, configured with MPICC instead
	// (/usr/bin/mpicc may be Open MPI's).
	Prefix string
	// Env is added to every command of this build (compiling, launching).
	Env []string
	// Unset lists variables removed from those commands' environment
	// (LD_LIBRARY_PATH for a private build, whose wrappers set an rpath).
	Unset []string
}

// configureArgs are test/mpi's configure options: C only, ROMIO's I/O
// tests off, the fault-tolerance directory on, and xfail tests built and
// run (runtests skips them otherwise; the suite reports them).
var configureArgs = []string{"--disable-fortran", "--disable-cxx", "--disable-romio", "--enable-ft-tests", "--enable-xfail"}

const stampName = ".dynrt-configured"

// environ returns the process environment with b's changes.
func (b Build) environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(b.Unset, k) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, b.Env...)
	return append(env, extra...)
}

// Configure configures test/mpi of srcDir out of tree into testDir for b,
// unless a previous Configure with the same command line finished there.
func Configure(ctx context.Context, log *slog.Logger, b Build, srcDir, testDir string) error {
	args := slices.Clone(configureArgs)
	var env []string
	if b.Prefix != "" {
		args = append(args, "--with-mpi="+b.Prefix)
	} else {
		env = append(env, "MPICC="+b.MPICC)
	}
	stamp := strings.Join(append(env, args...), " ") + "\n"
	if old, err := os.ReadFile(filepath.Join(testDir, stampName)); err == nil && string(old) == stamp {
		return nil
	}
	if err := os.MkdirAll(testDir, 0o755); err != nil {
		return err
	}
	log.Info("configuring test programs", "build", b.Name, "dir", testDir)
	cmd := exec.CommandContext(ctx, filepath.Join(srcDir, "configure"), args...)
	cmd.Dir = testDir
	cmd.Env = b.environ(env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		logf := filepath.Join(testDir, "configure.out")
		_ = os.WriteFile(logf, out, 0o644)
		return fmt.Errorf("configure test/mpi for %s in %s: %w (output in %s)", b.Name, testDir, err, logf)
	}
	return os.WriteFile(filepath.Join(testDir, stampName), []byte(stamp), 0o644)
}

// Make builds the programs of tests (and runs the testlists' build
// directives) in testDir with make -k -j jobs, directory by directory. A
// program that does not build is reported by Missing, not here: the other
// tests still run.
func Make(ctx context.Context, log *slog.Logger, b Build, testDir string, tests []mpichsuite.Test, directives []mpichsuite.Directive, jobs int) error {
	for _, d := range directives {
		if err := runMake(ctx, b, filepath.Join(testDir, d.Dir), 1, d.Target); err != nil {
			log.Warn("build directive failed", "dir", d.Dir, "target", d.Target, "err", err)
		}
	}
	byDir := map[string][]string{}
	var order []string
	for _, t := range tests {
		dir := path.Join(t.Dir, path.Dir(t.Name))
		if _, ok := byDir[dir]; !ok {
			order = append(order, dir)
		}
		prog := path.Base(t.Name)
		if !slices.Contains(byDir[dir], prog) {
			byDir[dir] = append(byDir[dir], prog)
		}
	}
	for _, dir := range order {
		log.Info("building test programs", "build", b.Name, "dir", dir, "programs", len(byDir[dir]))
		// make -k fails when one program fails; Missing tells which.
		_ = runMake(ctx, b, filepath.Join(testDir, dir), jobs, byDir[dir]...)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func runMake(ctx context.Context, b Build, dir string, jobs int, targets ...string) error {
	args := append([]string{"-k", fmt.Sprintf("-j%d", max(1, jobs))}, targets...)
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = dir
	cmd.Env = b.environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	_ = os.WriteFile(filepath.Join(dir, "dynrt-make.out"), out.Bytes(), 0o644)
	if err != nil {
		return fmt.Errorf("make in %s: %w (output in %s)", dir, err, filepath.Join(dir, "dynrt-make.out"))
	}
	return nil
}

// Missing says why t's program is not there after Make, or "" when it is.
func Missing(testDir string, t mpichsuite.Test) string {
	p := filepath.Join(testDir, t.Dir, t.Name)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return ""
	}
	return fmt.Sprintf("program %s was not built (see %s)", p, filepath.Join(testDir, t.Dir, path.Dir(t.Name), "dynrt-make.out"))
}
