package mpichsuite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Runner is a way of launching a test.
type Runner string

// The runners the suite compares.
const (
	Hydra         Runner = "hydra"           // the build's own mpiexec.hydra
	DynrunPrivate Runner = "dynrun-private"  // dynrun starting a private DVM per test
	DynrunWarm    Runner = "dynrun-warm"     // dynrun on a DVM of 4 virtual nodes started once
	HydraHosts    Runner = "hydra-hosts"     // the build's mpiexec.hydra over the same hosts and placement as DynrunHosts
	DynrunHosts   Runner = "dynrun-hosts"    // dynrun on a DVM over 3 namespace hosts (ssh), ranks spread by node
	WarmNodes            = 4                 // virtual nodes of the warm DVM
	HostCount            = 3                 // namespace hosts of the dynrun-hosts DVM
	DefaultLimit         = 180 * time.Second // runtests' default time limit
)

// Runners lists every runner in table order (and run order: a test's
// references run before the dynrun runners compared with them).
var Runners = []Runner{Hydra, DynrunPrivate, DynrunWarm, HydraHosts, DynrunHosts}

// Dynrun reports whether r launches with dynrun (is compared with a
// reference) rather than with mpiexec.hydra (is a reference).
func (r Runner) Dynrun() bool { return r != Hydra && r != HydraHosts }

// Reference is the runner r is compared with: Hydra on the same hosts and
// placement. dynrun-hosts' own reference is hydra-hosts; when have (the
// runners of a run) lacks it, Hydra on one host stands in. A reference is
// its own.
func (r Runner) Reference(have func(Runner) bool) Runner {
	if r == DynrunHosts && have(HydraHosts) {
		return HydraHosts
	}
	if r.Dynrun() {
		return Hydra
	}
	return r
}

// Sorted returns rs in table order, without duplicates; unknown runners
// come last, in their order.
func Sorted(rs []Runner) []Runner {
	var out []Runner
	for _, r := range Runners {
		if slices.Contains(rs, r) {
			out = append(out, r)
		}
	}
	for _, r := range rs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

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

// Place is where a runner launches, for the runners that share something
// between tests.
type Place struct {
	DVM string // the DVM's id (DynrunWarm, DynrunHosts)
	// HydraHosts: the ssh command for mpiexec.hydra's -launcher-exec (one
	// executable: a script adding the hosts' ssh config), and the hosts.
	LauncherExec string
	Hosts        []string
}

// Command returns the command line starting t under runner r. bin is the
// launcher (mpiexec.hydra or dynrun), at what the runner shares between
// tests. Like runtests, the test's env= entries go into the launcher's
// environment (both launchers forward it to the processes) and the program
// is started as ./name from the test's directory.
func Command(r Runner, t Test, bin string, at Place) (Launch, error) {
	argv := []string{bin}
	switch r {
	case Hydra:
		argv = append(argv, "-n", strconv.Itoa(t.NP))
		argv = append(argv, t.MpiexecArgs...)
	case HydraHosts:
		if at.LauncherExec == "" || len(at.Hosts) == 0 {
			return Launch{}, fmt.Errorf("runner %s needs the hosts and their ssh command", r)
		}
		// One slot per host in Hydra's list: it places rank i on host
		// i mod len(hosts), round after round, which is where
		// dynrun-hosts' --map-by node puts it (its S slots per host
		// hold the largest -n; Hydra never limits).
		argv = append(argv, "-launcher", "ssh", "-launcher-exec", at.LauncherExec,
			"-hosts", strings.Join(at.Hosts, ","), "-n", strconv.Itoa(t.NP))
		argv = append(argv, t.MpiexecArgs...)
	case DynrunPrivate, DynrunWarm, DynrunHosts:
		if r != DynrunPrivate {
			if at.DVM == "" {
				return Launch{}, fmt.Errorf("runner %s needs its DVM's id", r)
			}
			// --dvm by id: a DVM that died is an error, not a silent
			// private DVM.
			argv = append(argv, "--dvm", at.DVM)
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
		return Launch{}, fmt.Errorf("unknown runner %q (want hydra, dynrun-private, dynrun-warm, hydra-hosts or dynrun-hosts)", r)
	}
	argv = append(argv, "./"+t.Name)
	argv = append(argv, t.Args...)
	var env []string
	if r == HydraHosts {
		env = append(env, HydraSSHLimit...)
	}
	return Launch{Argv: argv, Env: append(env, t.Env...)}, nil
}

// HydraSSHLimit lifts Hydra's ssh throttle for HydraHosts. Its ssh
// launcher opens at most 8 connections per host in 15 s and prints a
// warning while it waits, which fails spawn tests (each spawn opens a new
// ssh per host; dynrun opens one per daemon, and the hosts' sshd takes 100
// at once): 100 in 100 s instead. Both are set because Hydra 4.0.2 sizes
// its table of connection times by the window's seconds, not by the limit
// (a limit above the window crashes it: "malloc(): invalid size").
var HydraSSHLimit = []string{"HYDRA_LAUNCHER_SSH_LIMIT=100", "HYDRA_LAUNCHER_SSH_LIMIT_TIME=100"}

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

// HostSlots is WarmSlots for the HostCount hosts of DynrunHosts (and
// HydraHosts, whose placement is the same).
func HostSlots(tests []Test) int { return slotsFor(tests, HostCount) }

func slotsFor(tests []Test, nodes int) int {
	most := 0
	for _, t := range tests {
		most = max(most, t.NP)
	}
	return max(2, (most+nodes-1)/nodes)
}
