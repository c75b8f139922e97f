// Package mpidetect tells, from a program's file, which PMI service its MPI
// library speaks: what `dynrun --pmi auto` (docs/mpi.md) offers a job.
//
// Open MPI speaks PMIx only; MPICH (and its ABI family: Intel MPI,
// MVAPICH) speaks PMI-1/PMI-2 over PMI_FD. A dynamically linked program
// names its MPI library in the ELF dynamic section (DT_NEEDED), which is
// cheap to read: one open and a few pages, whatever the size of the program.
// Scripts and interpreters (python3 running mpi4py, a shell wrapper) name
// nothing useful: they are Unknown, and the caller offers every mechanism.
//
// Classify is the pure part (sonames in, verdict out); Detect reads a file.
package mpidetect

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Need is what a program needs from the PMI service.
type Need string

const (
	// Unknown: a script, an interpreter or an unreadable file; it may
	// start any MPI (offer every mechanism).
	Unknown Need = "unknown"
	// PMIx: the program links Open MPI (or libpmix itself).
	PMIx Need = "pmix"
	// PMI: the program links MPICH or a library of MPICH's ABI (PMI-1/PMI-2).
	PMI Need = "pmi"
	// None: an ELF program that links no MPI library.
	None Need = "none"
)

// Verdict is what Detect found out and why.
type Verdict struct {
	Need Need
	// Why says what decided, for messages: "links libmpi.so.40 (Open MPI)",
	// "a script (#!/usr/bin/env python3)", "python3 is an interpreter".
	Why string
}

var (
	// Open MPI's libraries carry the soname version 40 since 3.0 (20 in
	// 2.x); ORTE and OPAL are Open MPI's runtime layers, PRRTE its 5.x
	// successor; libpmix is the PMIx client itself.
	openMPISoname = regexp.MustCompile(`^(libmpi(_[a-z0-9_+-]+)?\.so\.(20|40)|libopen-(rte|pal)\.so|libprrte\.so|libpmix\.so)(\.|$)`)
	// MPICH's own libraries, the MPICH ABI's libmpi.so.12 (Intel MPI,
	// MVAPICH, MPICH installed with the ABI names) and the PMI client
	// libraries of Slurm and MPICH.
	mpichSoname = regexp.MustCompile(`^(libmpich[a-z]*\.so|lib(mpi|mpifort|mpicxx|mpi_[a-z0-9_]+)\.so\.12|libpmi2?\.so)(\.|$)`)
)

// family names the MPI of a matched soname, for messages.
func family(soname string) string {
	switch {
	case strings.HasPrefix(soname, "libpmix."):
		return "PMIx"
	case openMPISoname.MatchString(soname):
		return "Open MPI"
	case strings.HasPrefix(soname, "libpmi"):
		return "PMI"
	default:
		return "MPICH ABI"
	}
}

// Classify decides from the DT_NEEDED entries of a dynamically linked ELF
// program. A program that links both kinds (which no MPI build does) is
// Unknown: every mechanism is offered and the library picks.
func Classify(needed []string) Verdict {
	var x, p string
	for _, so := range needed {
		switch {
		case x == "" && openMPISoname.MatchString(so):
			x = so
		case p == "" && mpichSoname.MatchString(so):
			p = so
		}
	}
	switch {
	case x != "" && p != "":
		return Verdict{Unknown, fmt.Sprintf("links both %s (%s) and %s (%s)", x, family(x), p, family(p))}
	case x != "":
		return Verdict{PMIx, fmt.Sprintf("links %s (%s)", x, family(x))}
	case p != "":
		return Verdict{PMI, fmt.Sprintf("links %s (%s)", p, family(p))}
	}
	return Verdict{None, "links no MPI library"}
}

// ClassifyProgram is Classify for a program that is a Go program or not
// (it has Go's build information section). Every program of dynrt built
// with PMIx (dynrun, and applications through lib/session, which can run a
// node daemon in-process) links libpmix as a PMIx server, not as a
// client: a Go program whose only PMIx library is libpmix gets no PMIx
// (a Go program that really is a PMIx client needs --pmi pmix).
func ClassifyProgram(needed []string, goProgram bool) Verdict {
	v := Classify(needed)
	if v.Need != PMIx || !goProgram {
		return v
	}
	for _, so := range needed {
		if openMPISoname.MatchString(so) && !strings.HasPrefix(so, "libpmix.") {
			return v // Open MPI itself
		}
	}
	return Verdict{None, "a Go program linking libpmix (as dynrt's programs do, for the PMIx server): no MPI library"}
}

// interpreters are programs that run other code which may load any MPI
// (mpi4py, Rmpi, MPI.jl, a shell wrapper): their own libraries say nothing.
var interpreters = regexp.MustCompile(`^(python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|julia|R|Rscript|node|nodejs|java|lua[0-9.]*|luajit|tclsh[0-9.]*|octave[a-z-]*|sh|bash|dash|zsh|ksh|mksh|csh|tcsh|fish|busybox)$`)

// wrappers run a program named among their arguments (`valgrind ./prog`,
// `env OMP_NUM_THREADS=1 ./prog`, `numactl -N 0 ./prog`): DetectCommand
// looks at that program.
var wrappers = regexp.MustCompile(`^(env|nice|ionice|chrt|taskset|numactl|hwloc-bind|time|timeout|nohup|setsid|stdbuf|unbuffer|catchsegv|valgrind|strace|ltrace|gdb|perf|xterm)$`)

// maxWrapperArgs bounds the arguments of a wrapper searched for its program.
const maxWrapperArgs = 16

// DetectCommand decides for a command line: Detect of its program, and for
// a wrapper (see wrappers) the first of its arguments that resolve names
// as a program, skipping options and VAR=VALUE settings (the values of
// options, such as nice's 10 in `nice -n 10 ./prog`, resolve to no
// program). resolve turns an argument into the path of an executable file,
// false if it names none. Errors are those of Detect on argv[0].
func DetectCommand(argv []string, resolve func(string) (string, bool)) (Verdict, error) {
	if len(argv) == 0 {
		return Verdict{Unknown, "no program"}, nil
	}
	path, ok := resolve(argv[0])
	if !ok {
		return Verdict{Unknown, "unreadable"}, fmt.Errorf("mpidetect: %s: not an executable file", argv[0])
	}
	v, err := Detect(path)
	if err != nil || !wrappers.MatchString(filepath.Base(path)) {
		return v, err
	}
	for i, a := range argv[1:min(len(argv), maxWrapperArgs+1)] {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			continue
		}
		if _, ok := resolve(a); !ok {
			continue
		}
		w, err := DetectCommand(argv[1+i:], resolve)
		if err != nil {
			break
		}
		// Messages name the wrapper before: "/usr/bin/valgrind runs
		// ./prog, which links ...", through two wrappers "/usr/bin/env
		// runs nice, which runs ./prog, which links ...".
		w.Why = "runs " + a + ", which " + w.Why
		return w, nil
	}
	return Verdict{Unknown, "runs no program found among its arguments"}, nil
}

// Detect reads the program at path (already resolved against PATH). Only
// a file it cannot open or read is an error; anything it cannot classify
// is Unknown with the reason in Why.
func Detect(path string) (Verdict, error) {
	f, err := os.Open(path)
	if err != nil {
		return Verdict{Unknown, "unreadable"}, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Verdict{Unknown, "not an ELF program (too short)"}, nil
		}
		return Verdict{Unknown, "unreadable"}, fmt.Errorf("mpidetect: read %s: %w", path, err)
	}
	if string(magic[:2]) == "#!" {
		line, _ := readLine(f, 2)
		return Verdict{Unknown, "a script (#!" + line + ")"}, nil
	}
	if string(magic[:]) != elf.ELFMAG {
		return Verdict{Unknown, "not an ELF program"}, nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return Verdict{Unknown, "not a readable ELF program"}, nil
	}
	defer ef.Close()
	switch base := filepath.Base(path); {
	case interpreters.MatchString(base):
		return Verdict{Unknown, base + " is an interpreter"}, nil
	case wrappers.MatchString(base):
		return Verdict{Unknown, base + " runs another program"}, nil
	}
	needed, err := ef.ImportedLibraries()
	if err != nil {
		return Verdict{Unknown, "unreadable dynamic section"}, nil
	}
	if len(needed) == 0 {
		// Statically linked: an MPI inside cannot be told from the
		// dynamic section (and Debian ships no static Open MPI).
		return Verdict{None, "statically linked"}, nil
	}
	return ClassifyProgram(needed, ef.Section(".go.buildinfo") != nil), nil
}

// readLine returns the rest of the first line after offset off (at most
// 120 bytes), for a script's interpreter in messages.
func readLine(f *os.File, off int64) (string, error) {
	buf := make([]byte, 120)
	n, err := f.ReadAt(buf, off)
	if n == 0 {
		return "", err
	}
	s := string(buf[:n])
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s), nil
}
