package mpichsuite

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCommand(t *testing.T) {
	ft := Test{Dir: "ft", Name: "senddead", NP: 2, Env: []string{"MPIR_CVAR_ENABLE_FT=1"},
		MpiexecArgs: []string{"-disable-auto-cleanup"}, Args: []string{"-v"}}
	hostsAt := Place{LauncherExec: "/c/ssh", Hosts: []string{"h0", "h1", "h2"}}
	odd := Test{Dir: "ckpoint", Name: "ck", NP: 2, MpiexecArgs: []string{"-ckpointlib", "blcr"}}
	cases := []struct {
		name   string
		runner Runner
		test   Test
		at     Place
		want   string // argv joined by spaces, or the error's beginning
	}{
		{"hydra keeps mpiexec arguments", Hydra, ft, Place{}, "mpiexec.hydra -n 2 -disable-auto-cleanup ./senddead -v"},
		{"private maps to --disable-auto-cleanup, oversubscribes", DynrunPrivate, ft, Place{}, "dynrun -n 2 --oversubscribe --disable-auto-cleanup ./senddead -v"},
		{"warm names its DVM", DynrunWarm, ft, Place{DVM: "abc"}, "dynrun --dvm abc -n 2 --disable-auto-cleanup ./senddead -v"},
		{"warm without a DVM", DynrunWarm, ft, Place{}, "error: runner dynrun-warm needs its DVM's id"},
		{"hosts name their DVM, spread by node", DynrunHosts, ft, Place{DVM: "abc"}, "dynrun --dvm abc -n 2 --map-by node --disable-auto-cleanup ./senddead -v"},
		{"hosts without a DVM", DynrunHosts, ft, Place{}, "error: runner dynrun-hosts needs its DVM's id"},
		{"unmapped argument", DynrunPrivate, odd, Place{}, `error: mpiexec argument "-ckpointlib" of ckpoint/ck 2 has no dynrun equivalent`},
		{"hydra passes any argument", Hydra, odd, Place{}, "mpiexec.hydra -n 2 -ckpointlib blcr ./ck"},
		{"hydra over the hosts: one slot each, round robin", HydraHosts, ft, hostsAt, "mpiexec.hydra -launcher ssh -launcher-exec /c/ssh -hosts h0,h1,h2 -n 2 -disable-auto-cleanup ./senddead -v"},
		{"hydra over the hosts without them", HydraHosts, ft, Place{DVM: "abc"}, "error: runner hydra-hosts needs the hosts and their ssh command"},
		{"unknown runner", Runner("srun"), ft, Place{}, `error: unknown runner "srun"`},
	}
	for _, c := range cases {
		bin := "dynrun"
		if !c.runner.Dynrun() {
			bin = "mpiexec.hydra"
		}
		l, err := Command(c.runner, c.test, bin, c.at)
		got := strings.Join(l.Argv, " ")
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		wantEnv := c.test.Env
		if c.runner == HydraHosts {
			wantEnv = append(slices.Clone(HydraSSHLimit), wantEnv...)
		}
		if err == nil && strings.Join(l.Env, " ") != strings.Join(wantEnv, " ") {
			t.Errorf("%s: env %q, want %q", c.name, l.Env, wantEnv)
		}
	}
}

func TestLimit(t *testing.T) {
	cases := []struct {
		limit   int
		ceiling time.Duration
		want    time.Duration
	}{
		{0, 0, DefaultLimit},
		{10, 0, 10 * time.Second},
		{600, 0, 600 * time.Second},
		{0, 30 * time.Second, 30 * time.Second},
		{10, 30 * time.Second, 10 * time.Second},
	}
	for _, c := range cases {
		if got := Limit(Test{TimeLimit: c.limit}, DefaultLimit, c.ceiling); got != c.want {
			t.Errorf("Limit(timeLimit=%d, ceiling %v) = %v, want %v", c.limit, c.ceiling, got, c.want)
		}
	}
}

func TestWarmSlots(t *testing.T) {
	cases := []struct {
		nps  []int
		want int
	}{
		{[]int{1, 2}, 2},
		{[]int{4, 10}, 3},
		{[]int{33, 2}, 9},
	}
	for _, c := range cases {
		var ts []Test
		for _, np := range c.nps {
			ts = append(ts, Test{NP: np})
		}
		if got := WarmSlots(ts); got != c.want {
			t.Errorf("WarmSlots(%v) = %d, want %d", c.nps, got, c.want)
		}
	}
}
