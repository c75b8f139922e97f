// Package mpichsuite is the pure logic of running MPICH's own test suite
// (test/mpi of MPICH's sources) under mpiexec.hydra and under dynrun:
// reading the testlist files, turning a test into a launcher command line,
// judging a run the way MPICH's harness (test/mpi/runtests) does, and
// summing up. It does no I/O; the runner (internal/mpichsuite/runner) and
// the command (internal/mpichsuite/cmd/mpichsuite) do.
package mpichsuite

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// DefaultNP is the process count of a testlist line that names none
// (runtests' $np_default).
const DefaultNP = 2

// Test is one line of a testlist: a program and how to run it.
type Test struct {
	Dir  string // directory relative to test/mpi, e.g. "spawn" or "rma/foo"
	Name string // program name (a line "sub/prog" keeps "sub/prog")
	NP   int
	Line int // line number in its testlist, for messages

	Args        []string // arg=  (program arguments, in order)
	Env         []string // env=  (VAR=VAL for the launcher's environment)
	MpiexecArgs []string // mpiexecarg= (arguments for mpiexec before the program)
	TimeLimit   int      // timeLimit= seconds; 0 = the default
	ResultTest  string   // resultTest=: "", TestStatus, TestStatusNoErrors or TestErrFatal
	XFail       string   // xfail=: non-empty marks an expected failure (a ticket name)
	Strict      string   // strict=: "false" marks a test of non-standard extensions
	MPIX        string   // mpix=: "true" marks a test of MPIX extensions
	Mem         string   // mem=: GB of memory the test needs (informational)
	Lock        string   // lock=: runtests' lock file name (informational: we run one test at a time)
}

// ID names a test uniquely within a suite run: directory, program, process
// count, arguments and environment (some programs are listed several
// times, differing in any of these).
func (t Test) ID() string {
	id := t.Dir + "/" + t.Name + " " + strconv.Itoa(t.NP)
	for _, a := range t.Args {
		id += " " + a
	}
	for _, e := range t.Env {
		id += " env:" + e
	}
	return id
}

// Entry is a parsed testlist line: a test, a subdirectory to recurse into
// (a line naming a directory; the caller knows which names are directories),
// or a build directive ("!dir:target": run make target in dir first).
type Entry struct {
	Test Test
	// Directive is set for "!dir:target" lines.
	Directive *Directive
}

// Directive is runtests' "!dir:target": build target in dir before going on.
type Directive struct{ Dir, Target string }

// Result tests runtests knows.
const (
	ResultDefault            = ""
	ResultTestStatus         = "TestStatus"
	ResultTestStatusNoErrors = "TestStatusNoErrors"
	ResultTestErrFatal       = "TestErrFatal"
)

var substRE = regexp.MustCompile(`@[A-Za-z_][A-Za-z0-9_]*@`)

// Substitute replaces configure's @name@ placeholders of a testlist.in
// (e.g. "@namepub_tests@namepub 2", "@spawndir@") with vars[name]. A
// placeholder vars does not define is an error: guessing would run or skip
// the wrong tests.
func Substitute(text string, vars map[string]string) (string, error) {
	var missing []string
	out := substRE.ReplaceAllStringFunc(text, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("testlist uses configure variables %s that have no value: run test/mpi's configure, or give them a value", strings.Join(missing, ", "))
	}
	return out, nil
}

// ConfigureVars are the values test/mpi's configure gives the testlist.in
// placeholders with the options the suite configures it with (C only,
// spawn, rma and ft on, xfail tests run, no large-memory tests, not strict).
var ConfigureVars = map[string]string{
	"namepub_tests": "",
	"spawndir":      "spawn",
	"rmadir":        "rma",
	"partdir":       "#",
	"largetest":     "#",
	"mpix":          "",
	"comm_overlap":  "#",
	"ftdir":         "ft",
	"faultsdir":     "#",
	"iodir":         "#",
	"f77dir":        "#",
	"f90dir":        "#",
	"f08dir":        "#",
	"cxxdir":        "#",
	"impldir":       "#",
	"threadsdir":    "#",
	"ckpointdir":    "#",
	"errordir":      "#",
	"perfdir":       "#",
	"otherlangs":    "#",
	"ch3_tests":     "#",
	"ch4_tests":     "#",
	"ch4_ucx_tests": "#",
	"ch4_ofi_tests": "#",
}

// ParseTestlist reads a testlist of directory dir the way runtests does:
// '#' starts a comment, a line is "program [np [key=value ...]]", np
// defaults to DefaultNP, tokens after np without '=' are ignored (runtests
// ignores them too; MPICH's pt2pt/testlist has one). Unknown keys, a bad np
// and an unknown resultTest are errors naming the line.
func ParseTestlist(r io.Reader, dir string) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "!") {
			d, tgt, ok := strings.Cut(line[1:], ":")
			if !ok {
				return nil, fmt.Errorf("%s/testlist:%d: %q: a build directive is !dir:target", dir, n, line)
			}
			out = append(out, Entry{Directive: &Directive{Dir: d, Target: tgt}})
			continue
		}
		t, err := parseLine(strings.Fields(line), dir, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Entry{Test: t})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s/testlist: %w", dir, err)
	}
	return out, nil
}

func parseLine(f []string, dir string, n int) (Test, error) {
	t := Test{Dir: dir, Name: f[0], NP: DefaultNP, Line: n}
	where := func(format string, a ...any) error {
		return fmt.Errorf("%s/testlist:%d: "+format, append([]any{dir, n}, a...)...)
	}
	if len(f) > 1 {
		np, err := strconv.Atoi(f[1])
		if err != nil || np < 1 {
			return t, where("process count %q of %s is not a positive number", f[1], t.Name)
		}
		t.NP = np
	}
	for _, kv := range f[min(2, len(f)):] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue // runtests ignores it
		}
		switch k {
		case "arg":
			t.Args = append(t.Args, v)
		case "env":
			if !strings.Contains(v, "=") || strings.HasPrefix(v, "=") {
				return t, where("env=%s of %s is not VAR=VALUE", v, t.Name)
			}
			t.Env = append(t.Env, v)
		case "mpiexecarg":
			t.MpiexecArgs = append(t.MpiexecArgs, v)
		case "timeLimit":
			s, err := strconv.Atoi(v)
			if err != nil || s < 1 {
				return t, where("timeLimit=%s of %s is not a positive number of seconds", v, t.Name)
			}
			t.TimeLimit = s
		case "resultTest":
			switch v {
			case ResultTestStatus, ResultTestStatusNoErrors, ResultTestErrFatal:
			default:
				return t, where("resultTest=%s of %s: runtests knows only TestStatus, TestStatusNoErrors and TestErrFatal", v, t.Name)
			}
			t.ResultTest = v
		case "xfail":
			if v == "" {
				return t, where("xfail= of %s needs a reason (a ticket)", t.Name)
			}
			t.XFail = v
		case "strict":
			t.Strict = v
		case "mpix":
			t.MPIX = v
		case "mem":
			t.Mem = v
		case "lock":
			t.Lock = v
		case "init":
			return t, where("init=%s of %s names a Perl routine of runtests, which this runner does not have", v, t.Name)
		default:
			return t, where("unknown key %q in %s (runtests knows arg, env, mpiexecarg, timeLimit, resultTest, xfail, strict, mpix, mem, lock, init)", k, kv)
		}
	}
	return t, nil
}
