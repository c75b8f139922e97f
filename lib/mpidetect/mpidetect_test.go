package mpidetect

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		needed []string
		want   Need
		why    string
	}{
		{nil, None, "links no MPI library"},
		{[]string{"libc.so.6"}, None, "links no MPI library"},
		// Debian's mpicc.openmpi (Open MPI 4.1) and its Fortran/C++ wrappers.
		{[]string{"libmpi.so.40", "libc.so.6"}, PMIx, "links libmpi.so.40 (Open MPI)"},
		{[]string{"libmpi_mpifh.so.40", "libgfortran.so.5"}, PMIx, "links libmpi_mpifh.so.40 (Open MPI)"},
		{[]string{"libmpi_cxx.so.40"}, PMIx, "links libmpi_cxx.so.40 (Open MPI)"},
		{[]string{"libmpi.so.20"}, PMIx, "links libmpi.so.20 (Open MPI)"},
		{[]string{"libopen-rte.so.40", "libopen-pal.so.40"}, PMIx, "links libopen-rte.so.40 (Open MPI)"},
		{[]string{"libopen-pal.so"}, PMIx, "links libopen-pal.so (Open MPI)"},
		{[]string{"libpmix.so.2"}, PMIx, "links libpmix.so.2 (PMIx)"},
		{[]string{"libprrte.so.3"}, PMIx, "links libprrte.so.3 (Open MPI)"},
		// Debian's mpicc.mpich and the MPICH ABI.
		{[]string{"libmpich.so.12", "libc.so.6"}, PMI, "links libmpich.so.12 (MPICH ABI)"},
		{[]string{"libmpichfort.so.12"}, PMI, "links libmpichfort.so.12 (MPICH ABI)"},
		{[]string{"libmpi.so.12"}, PMI, "links libmpi.so.12 (MPICH ABI)"},
		{[]string{"libmpifort.so.12"}, PMI, "links libmpifort.so.12 (MPICH ABI)"},
		{[]string{"libpmi2.so.0"}, PMI, "links libpmi2.so.0 (PMI)"},
		{[]string{"libpmi.so.0"}, PMI, "links libpmi.so.0 (PMI)"},
		// Near misses are not MPI.
		{[]string{"libmpfr.so.6", "libmpc.so.3", "libpmem.so.1"}, None, "links no MPI library"},
		{[]string{"libmpi.so.99"}, None, "links no MPI library"},
		{[]string{"libopen-rtex.so"}, None, "links no MPI library"},
		// Both: let the library choose among everything offered.
		{[]string{"libmpich.so.12", "libmpi.so.40"}, Unknown, "links both libmpi.so.40 (Open MPI) and libmpich.so.12 (MPICH ABI)"},
	} {
		got := Classify(tc.needed)
		if got.Need != tc.want || got.Why != tc.why {
			t.Errorf("Classify(%q) = %q %q, want %q %q", tc.needed, got.Need, got.Why, tc.want, tc.why)
		}
	}
}

// TestClassifyProgram: a Go program linking libpmix is one of dynrt's own
// (the PMIx server is in them): it got PMIx, with a scratch directory and
// a namespace per job, when `dynrun --pmi auto` started dynrun or a
// malleable application built with -tags pmix.
func TestClassifyProgram(t *testing.T) {
	for _, tc := range []struct {
		needed []string
		goProg bool
		want   Need
	}{
		{[]string{"libpmix.so.2", "libc.so.6"}, true, None},
		{[]string{"libpmix.so.2", "libc.so.6"}, false, PMIx},
		{[]string{"libmpi.so.40", "libpmix.so.2"}, true, PMIx}, // Go with Open MPI through cgo
		{[]string{"libmpich.so.12"}, true, PMI},
		{[]string{"libc.so.6"}, true, None},
	} {
		if got := ClassifyProgram(tc.needed, tc.goProg); got.Need != tc.want {
			t.Errorf("ClassifyProgram(%q, go %v) = %q (%s), want %q", tc.needed, tc.goProg, got.Need, got.Why, tc.want)
		}
	}
}

// TestDetect reads real programs: ones built here with the machine's
// compilers (each case skips without its compiler), a script, an
// interpreter, and files that are no program.
func TestDetect(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	if err := os.WriteFile(src, []byte("#include <stdio.h>\nint main(void){puts(\"x\");return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mpiSrc := filepath.Join(dir, "m.c")
	if err := os.WriteFile(mpiSrc, []byte("#include <mpi.h>\nint main(int c,char**v){MPI_Init(&c,&v);MPI_Finalize();return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, cc string, args ...string) string {
		t.Helper()
		if _, err := exec.LookPath(cc); err != nil {
			t.Skipf("%s is missing (make deps-mpi deps-openmpi)", cc)
		}
		out := filepath.Join(dir, strings.ReplaceAll(cc+strings.Join(args, ""), "/", "_"))
		if b, err := exec.Command(cc, append(args, "-o", out)...).CombinedOutput(); err != nil {
			t.Skipf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
		}
		return out
	}
	file := func(name, content string, mode os.FileMode) func(t *testing.T) string {
		return func(t *testing.T) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(content), mode); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	python := func(t *testing.T) string {
		// /usr/bin's, an ELF program (PATH may hold a wrapper script).
		const p = "/usr/bin/python3"
		if _, err := os.Stat(p); err != nil {
			t.Skip("/usr/bin/python3 is missing")
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		path    func(t *testing.T) string
		want    Need
		why     string // a substring of Why
		wantErr bool
	}{
		{"cc", func(t *testing.T) string { return build(t, "cc", src) }, None, "links no MPI library", false},
		{"cc -static", func(t *testing.T) string { return build(t, "cc", "-static", src) }, None, "statically linked", false},
		{"mpicc.openmpi", func(t *testing.T) string { return build(t, "mpicc.openmpi", mpiSrc) }, PMIx, "links libmpi.so.40 (Open MPI)", false},
		{"mpicc.mpich", func(t *testing.T) string { return build(t, "mpicc.mpich", mpiSrc) }, PMI, "(MPICH ABI)", false},
		{"/bin/true", func(*testing.T) string { return "/bin/true" }, None, "links no MPI library", false},
		{"script", file("run.sh", "#!/usr/bin/env python3\nprint(1)\n", 0o755), Unknown, "a script (#!/usr/bin/env python3)", false},
		{"interpreter", python, Unknown, "is an interpreter", false},
		{"text", file("notes.txt", "hello world\n", 0o644), Unknown, "not an ELF program", false},
		{"short", file("short", "#", 0o644), Unknown, "too short", false},
		{"bad ELF", file("bad", "\x7fELF\x02\x01\x01junk", 0o755), Unknown, "not a readable ELF program", false},
		{"missing", func(*testing.T) string { return filepath.Join(dir, "nothing") }, Unknown, "unreadable", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.path(t))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Detect: error %v, want error %v", err, tc.wantErr)
			}
			if got.Need != tc.want || !strings.Contains(got.Why, tc.why) {
				t.Errorf("Detect = %q %q, want %q and a reason with %q", got.Need, got.Why, tc.want, tc.why)
			}
		})
	}
}

// BenchmarkDetect is the cost --pmi auto adds to a launch: one Detect of
// the program (docs/mpi.md "Open MPI (PMIx)", the choice of auto).
func BenchmarkDetect(b *testing.B) {
	for _, p := range []string{"/bin/true", "/usr/bin/mpirun.openmpi", os.Args[0]} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		b.Run(filepath.Base(p), func(b *testing.B) {
			for b.Loop() {
				if _, err := Detect(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDetectCommand: a wrapper (valgrind, env, nice, numactl, ...) is seen
// through to the program among its arguments; interpreters and scripts
// stay Unknown. The programs are built here; the wrappers are copies of
// /bin/true under their names (only the name makes one a wrapper).
func TestDetectCommand(t *testing.T) {
	dir := t.TempDir()
	mpiSrc := filepath.Join(dir, "m.c")
	if err := os.WriteFile(mpiSrc, []byte("#include <mpi.h>\nint main(int c,char**v){MPI_Init(&c,&v);MPI_Finalize();return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	progs := map[string]string{} // name -> path
	for _, cc := range []string{"mpicc.openmpi", "mpicc.mpich"} {
		if _, err := exec.LookPath(cc); err != nil {
			t.Skipf("%s is missing (make deps-mpi deps-openmpi)", cc)
		}
		out := filepath.Join(dir, strings.TrimPrefix(cc, "mpicc."))
		if b, err := exec.Command(cc, "-o", out, mpiSrc).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cc, err, b)
		}
		progs["./"+filepath.Base(out)] = out
	}
	tru, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to copy as wrappers")
	}
	for _, w := range []string{"valgrind", "env", "nice", "numactl", "python3"} {
		p := filepath.Join(dir, w)
		if err := os.WriteFile(p, tru, 0o755); err != nil {
			t.Fatal(err)
		}
		progs[w] = p
	}
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec ./openmpi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	progs["./run.sh"] = script
	resolve := func(name string) (string, bool) { p, ok := progs[name]; return p, ok }
	for _, tc := range []struct {
		argv []string
		want Need
		why  string
	}{
		{[]string{"./openmpi", "x"}, PMIx, "links libmpi.so.40 (Open MPI)"},
		{[]string{"valgrind", "--leak-check=full", "./openmpi", "-n", "3"}, PMIx, "runs ./openmpi, which links libmpi.so.40 (Open MPI)"},
		{[]string{"env", "OMP_NUM_THREADS=1", "nice", "-n", "10", "./mpich"}, PMI, "runs nice, which runs ./mpich, which links libmpich.so.12 (MPICH ABI)"},
		{[]string{"numactl", "-N", "0", "./openmpi"}, PMIx, "runs ./openmpi, which links libmpi.so.40 (Open MPI)"},
		{[]string{"valgrind", "./run.sh"}, Unknown, "runs ./run.sh, which a script (#!/bin/sh)"},
		{[]string{"valgrind", "--tool=memcheck"}, Unknown, "runs no program found among its arguments"},
		{[]string{"python3", "./openmpi"}, Unknown, "python3 is an interpreter"},
		{nil, Unknown, "no program"},
	} {
		got, err := DetectCommand(tc.argv, resolve)
		if err != nil || got.Need != tc.want || got.Why != tc.why {
			t.Errorf("DetectCommand(%q) = %q %q, %v; want %q %q", tc.argv, got.Need, got.Why, err, tc.want, tc.why)
		}
	}
	if _, err := DetectCommand([]string{"./missing"}, resolve); err == nil {
		t.Error("DetectCommand of a program that resolves to nothing: no error")
	}
}
