package mpichsuite

import (
	"fmt"
	"strconv"
	"time"
)

// Runner is a way of launching a test.
type Runner string

// The runners the suite compares.
const (
	Hydra         Runner = "hydra"           // the build's own mpiexec.hydra
	DynrunPrivate Runner = "dynrun-private"  // dynrun starting a private DVM per test
	DynrunWarm    Runner = "dynrun-warm"     // dynrun on a DVM of 4 virtual nodes started once
	DynrunHosts   Runner = "dynrun-hosts"    // dynrun on a DVM over 3 namespace hosts (ssh), ranks spread by node
	WarmNodes            = 4                 // virtual nodes of the warm DVM
	HostCount            = 3                 // namespace hosts of the dynrun-hosts DVM
	DefaultLimit         = 180 * time.Second // runtests' default time limit
)

// Runners lists every runner in table order.
var Runners = []Runner{Hydra, DynrunPrivate, DynrunWarm, DynrunHosts}

// mpiexecToDynrun maps the mpiexec.hydra arguments MPICH's testlists use to
// dynrun's. A test with any other mpiexecarg cannot be run under dynrun and
// is reported as not run (the suite never guesses).
var mpiexecToDynrun = map[string][]string{
	// Hydra keeps the job going when a process dies, signals the survivors
	// and reports the dead ranks through PMI, and prints nothing of its own
	// when a rank exits non-zero: dynrun's --disable-auto-cleanup
	// (--keep-going would add its report line, which runtests counts as
	// unexpected output).
	"-disable-auto-cleanup": {"--disable-auto-cleanup"},
}

// Launch is how to start a test: the command line and the variables added
// to the launcher's environment.
type Launch struct {
	Argv []string
	Env  []string
}

// Command returns the command line starting t under runner r. bin is the
// launcher (mpiexec.hydra or dynrun), dvm the id of the DVM the runner
// shares between tests (DynrunWarm, DynrunHosts). Like runtests, the test's env= entries go into the launcher's
// environment (both launchers forward it to the processes) and the program
// is started as ./name from the test's directory.
func Command(r Runner, t Test, bin, dvm string) (Launch, error) {
	argv := []string{bin}
	switch r {
	case Hydra:
		argv = append(argv, "-n", strconv.Itoa(t.NP))
		argv = append(argv, t.MpiexecArgs...)
	case DynrunPrivate, DynrunWarm, DynrunHosts:
		if r != DynrunPrivate {
			if dvm == "" {
				return Launch{}, fmt.Errorf("runner %s needs its DVM's id", r)
			}
			// --dvm by id: a DVM that died is an error, not a silent
			// private DVM.
			argv = append(argv, "--dvm", dvm)
		}
		argv = append(argv, "-n", strconv.Itoa(t.NP))
		if r == DynrunHosts {
			// Round robin over the hosts: even a 2-process test has
			// its ranks on two hosts.
			argv = append(argv, "--map-by", "node")
		}
		if r == DynrunPrivate {
			// Hydra starts any number of processes on one host; a
			// private DVM has one slot per CPU.
			argv = append(argv, "--oversubscribe")
		}
		for _, a := range t.MpiexecArgs {
			m, ok := mpiexecToDynrun[a]
			if !ok {
				return Launch{}, fmt.Errorf("mpiexec argument %q of %s has no dynrun equivalent in the suite's mapping", a, t.ID())
			}
			argv = append(argv, m...)
		}
	default:
		return Launch{}, fmt.Errorf("unknown runner %q (want hydra, dynrun-private, dynrun-warm or dynrun-hosts)", r)
	}
	argv = append(argv, "./"+t.Name)
	argv = append(argv, t.Args...)
	return Launch{Argv: argv, Env: append([]string(nil), t.Env...)}, nil
}

// Limit is t's time limit: timeLimit= or def, at most ceiling when that is
// positive (TIMEOUT= of the script, to make a run with hangs shorter).
func Limit(t Test, def, ceiling time.Duration) time.Duration {
	d := def
	if t.TimeLimit > 0 {
		d = time.Duration(t.TimeLimit) * time.Second
	}
	if ceiling > 0 && d > ceiling {
		d = ceiling
	}
	return d
}

// WarmSlots is the slot count per node of the warm DVM so that the largest
// process count of tests fits on its WarmNodes nodes (at least 2).
func WarmSlots(tests []Test) int { return slotsFor(tests, WarmNodes) }

// HostSlots is WarmSlots for the HostCount hosts of DynrunHosts.
func HostSlots(tests []Test) int { return slotsFor(tests, HostCount) }

func slotsFor(tests []Test, nodes int) int {
	most := 0
	for _, t := range tests {
		most = max(most, t.NP)
	}
	return max(2, (most+nodes-1)/nodes)
}
