package chaos

import (
	"slices"
	"strings"
	"testing"
)

func TestGenerateReplays(t *testing.T) {
	c := GenConfig{Steps: 300, Faults: AllFaults, FaultRate: 0.4}
	a, err := Generate(42, c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(42, c)
	other, _ := Generate(43, c)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave two step lists")
	}
	if slices.Equal(a, other) {
		t.Error("seeds 42 and 43 gave the same steps")
	}
}

// Every generated step is one the harness can run: jobs first, faults
// only of the enabled kinds, each on an operation it is about.
func TestGenerateShapes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		faults []Fault
		rate   float64
	}{
		{"no faults", nil, 0.5},
		{"rate 0", AllFaults, 0},
		{"every fault", AllFaults, 1},
		{"process faults only", []Fault{FaultKillOld, FaultKillNew, FaultKillLeaving, FaultStopOld, FaultStopNew, FaultStopLeaving}, 0.5},
		{"confirm timeouts only", []Fault{FaultConfirmTimeout}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := Generate(7, GenConfig{Steps: 500, Faults: tt.faults, FaultRate: tt.rate})
			if err != nil {
				t.Fatal(err)
			}
			faults, ops := 0, map[Op]bool{}
			for i, s := range steps {
				ops[s.Op] = true
				if s.N != i+1 || (i < 2 && (s.Op != OpLaunch || s.Fault != FaultNone)) {
					t.Fatalf("step %d: %s", i, s)
				}
				if s.Fault == FaultNone {
					if s.Target != "" {
						t.Errorf("%s: a target without a fault", s)
					}
					continue
				}
				faults++
				if !slices.Contains(tt.faults, s.Fault) {
					t.Errorf("%s: fault not enabled", s)
				}
				switch {
				case s.Target == TargetNew && s.Op != OpAdd,
					s.Target == TargetLeaving && s.Op != OpSub && s.Op != OpSubRanks,
					s.Fault == FaultConfirmTimeout && s.Op != OpAdd,
					isProcFault(s.Fault) && s.Target == "",
					strings.HasPrefix(string(s.Fault), "stop-") && s.Delay <= 0:
					t.Errorf("%s: fault does not fit the step", s)
				}
			}
			switch {
			case tt.rate == 0 || len(tt.faults) == 0:
				if faults != 0 {
					t.Errorf("%d faults, want none", faults)
				}
			case tt.rate == 1:
				if faults != len(steps)-2 {
					t.Errorf("%d faults in %d steps, want one per step after the first two", faults, len(steps))
				}
			case faults < len(steps)/4:
				t.Errorf("%d faults in %d steps at rate %g", faults, len(steps), tt.rate)
			}
			if tt.faults == nil && len(ops) < 8 {
				t.Errorf("only operations %v in 500 steps", ops)
			}
		})
	}
}

func TestGenConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		c    GenConfig
		frag string
	}{
		{GenConfig{Steps: 0}, "0 steps: want at least 1"},
		{GenConfig{Steps: 1, FaultRate: 1.5}, "fault rate 1.5"},
		{GenConfig{Steps: 1, Faults: []Fault{"boom"}}, `unknown fault "boom"`},
	} {
		if _, err := Generate(1, tt.c); err == nil || !strings.Contains(err.Error(), tt.frag) {
			t.Errorf("Generate(%+v): %v, want %q", tt.c, err, tt.frag)
		}
	}
}

func TestParseFaults(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []Fault
		err  string
	}{
		{"", nil, ""},
		{"all", AllFaults, ""},
		{"kill9-old, dvm-stop,kill9-old", []Fault{FaultKillOld, FaultStopDVM}, ""},
		{"kill9-old,nope", nil, `unknown fault "nope"`},
	} {
		got, err := ParseFaults(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseFaults(%q): %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseFaults(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestStepString(t *testing.T) {
	s := Step{N: 3, Op: OpSub, Count: 1, Fault: FaultKillLeaving, Target: TargetLeaving, JobPick: 1, PeerPick: 2, ProcPick: 3, NodePick: 4}
	if got, want := s.String(), "#3 sub n=1 fault=kill9-leaving pick=1/2/3/4"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func isProcFault(f Fault) bool {
	_, _, ok := procFault(f)
	return ok
}

func TestProcFault(t *testing.T) {
	for _, tt := range []struct {
		f      Fault
		kill   bool
		target Target
		ok     bool
	}{
		{FaultKillOld, true, TargetOld, true},
		{FaultKillNew, true, TargetNew, true},
		{FaultStopLeaving, false, TargetLeaving, true},
		{FaultHangDaemon, false, "", false},
	} {
		kill, target, ok := procFault(tt.f)
		if kill != tt.kill || target != tt.target || ok != tt.ok {
			t.Errorf("procFault(%s) = %v %q %v", tt.f, kill, target, ok)
		}
	}
}

// A replace run draws REPLACE requests; without it a seed's steps are
// those of before (no REPLACE), and -elastic and -replace combine.
func TestGenerateReplace(t *testing.T) {
	for _, elastic := range []bool{false, true} {
		plain, _ := Generate(9, GenConfig{Steps: 400, Elastic: elastic})
		repl, err := Generate(9, GenConfig{Steps: 400, Elastic: elastic, Replace: true})
		if err != nil {
			t.Fatal(err)
		}
		count := func(ss []Step, op Op) int {
			n := 0
			for _, s := range ss {
				if s.Op == op {
					n++
				}
			}
			return n
		}
		if count(plain, OpReplace) != 0 || count(repl, OpReplace) < 20 {
			t.Errorf("elastic %v: %d REPLACE steps without -replace, %d with; want 0 and some", elastic, count(plain, OpReplace), count(repl, OpReplace))
		}
		if elastic && count(repl, OpGrow) == 0 {
			t.Errorf("an elastic replace run has no grow step")
		}
		for _, s := range repl {
			if s.Op == OpReplace && s.Count != 1 {
				t.Errorf("step %s: want a REPLACE of 1", s)
			}
		}
	}
}
