package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestParseSchedule(t *testing.T) {
	tests := []struct {
		in   string
		want []Request
	}{
		{"", nil},
		{"20:+2", []Request{{Step: 20, Type: wire.RCAdd, N: 2}}},
		{"20:+2, 40:-1,60:-r1/3", []Request{
			{Step: 20, Type: wire.RCAdd, N: 2}, {Step: 40, Type: wire.RCSub, N: 1},
			{Step: 60, Type: wire.RCSub, N: 2, Ranks: []int{1, 3}},
		}},
	}
	for _, tc := range tests {
		got, err := parseSchedule(tc.in, 100)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"20", "20:", "x:+1", "0:+1", "100:+1", "20:*2", "20:+0", "20:+x", "20:-r", "20:-r0", "20:-r1/x", "20:+1,20:+1", "30:+1,20:-1"} {
		if _, err := parseSchedule(bad, 100); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("%q: err %v, want ErrInvalid", bad, err)
		}
	}
}

// TestBadFlags: a bad command line ends with a message naming the problem
// and exit status 2, before any runtime call (no DVM here).
func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--nx", "2"}, "--nx and --ny must be at least 3"},
		{[]string{"--steps", "0"}, "--steps 0"},
		{[]string{"--check", "0"}, "--check 0"},
		{[]string{"--residual-every", "-1"}, "--residual-every -1"},
		{[]string{"--trigger", "cron"}, `--trigger "cron"`},
		{[]string{"--trigger", "external", "--schedule", "5:+1"}, "--schedule needs --trigger app"},
		{[]string{"--schedule", "5:+1,3:-1"}, "steps must increase"},
		{[]string{"--steps", "10", "--schedule", "10:+1"}, "step must be a number in [1, 10)"},
		{[]string{"--schedule", "5:-r0"}, "rank 0 runs the schedule"},
		{[]string{"--wait-changes", "2"}, "--wait-changes needs --trigger external"},
		{[]string{"--trigger", "external", "--wait-changes", "-1"}, "--wait-changes -1"},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"heat"}, tc.args...), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 and %q", tc.args, code, errb.String(), out.String(), tc.want)
		}
	}
}

// TestNoRuntime: good flags but no DVM: exit 1 with the session's error.
func TestNoRuntime(t *testing.T) {
	for _, k := range []string{"DYNRT_DAEMON", "DYNRT_JOB", "DYNRT_RANK"} {
		t.Setenv(k, "")
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"heat"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "DYNRT_") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

func sampleHistory() History {
	ms := time.Millisecond
	us := time.Microsecond
	return History{
		Segments: []Segment{
			{Procs: 2, FirstStep: 0, Steps: 40, Compute: 40 * ms, Halo: 8 * ms, Residual: 2 * ms, Check: 400 * us},
			{Procs: 4, FirstStep: 40, Steps: 60, Compute: 30 * ms, Halo: 12 * ms, Residual: 3 * ms, Check: 600 * us},
			{Procs: 3, FirstStep: 100, Steps: 100, Compute: 66 * ms, Halo: 18 * ms, Residual: 5 * ms, Check: 1 * ms},
		},
		Changes: []Change{
			{Delta: "mpi://rte/a/rc/1", Type: wire.RCAdd, Status: wire.RCFinalized, From: 2, To: 4, Step: 40,
				Phase1: 90 * us, Phase2: 400 * us, Phase3: 3 * ms, Accepts: 2, Pending: 25 * ms, PendingSteps: 10,
				Comm: 2 * ms, Redist: 1500 * us, MovedRows: 32, SegBefore: 0},
			{Delta: "mpi://rte/a/rc/2", Type: wire.RCAdd, Status: wire.RCAborted, From: 4, To: 4, Step: 70,
				Phase1: 80 * us, Phase2: 300 * us, Phase3: 1 * ms, Accepts: 1, SegBefore: 1},
			{Delta: "mpi://rte/a/rc/3", Type: wire.RCSub, Status: wire.RCFinalized, From: 4, To: 3, Step: 100,
				Phase1: 70 * us, Phase2: 350 * us, Phase3: 2 * ms, Accepts: 1, Comm: 1 * ms, Redist: 800 * us,
				MovedRows: 21, SegBefore: 1},
		},
	}
}

func TestAmortise(t *testing.T) {
	am := sampleHistory().Amortise()
	if len(am) != 2 {
		t.Fatalf("%d amortisations, want 2 (the aborted change has none)", len(am))
	}
	// rc/1: before 50.4 ms/40 = 1.26 ms, after 45.6/60 = 0.76 ms: G 0.5 ms;
	// O = 0.09+0.4+3+2+1.5 = 6.99 ms → n 13.98, pays back after 14 steps.
	a := am[0]
	if a.O != 6990*time.Microsecond || a.G != 500*time.Microsecond || a.After != 14 || a.N < 13.97 || a.N > 13.99 {
		t.Errorf("rc/1: %+v", a)
	}
	// rc/3 made the steps slower (0.76 → 0.9 ms): never.
	if b := am[1]; b.G >= 0 || b.After != 0 || b.N != 0 {
		t.Errorf("rc/3: %+v", b)
	}
}

func TestSummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSummary(&buf, 64, 64, 200, 1.25e-3, sampleHistory()); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.golden", buf.Bytes())
	buf.Reset()
	if err := WriteSummary(&buf, 64, 64, 200, 0.5, History{Segments: sampleHistory().Segments[:1]}); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-static.golden", buf.Bytes())
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-update rewrites it):\n%s\nwant:\n%s", name, got, want)
	}
}
