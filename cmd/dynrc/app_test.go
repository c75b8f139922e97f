package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

// runMain calls Main as the binary would (real attach, no DVM needed for
// what these tests do).
func runMain(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"dynrc"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := runMain("--help")
	if code != 0 || !strings.Contains(out, "dynrc") {
		t.Fatalf("--help: exit %d, output %q", code, out)
	}
	for _, want := range []string{"Exit status:", "4  busy", "3  --timeout", "script [--job J]"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runMain("--version")
	if code != 0 || !strings.HasPrefix(out, "dynrc version ") {
		t.Fatalf("--version: exit %d, output %q", code, out)
	}
	code, out, _ = runMain("sub", "--help")
	if code != 0 || !strings.Contains(out, "--ranks LIST") || !strings.Contains(out, "--queue") {
		t.Fatalf("sub --help: exit %d, output %q", code, out)
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	if code, _, errOut := runMain("--no-such-flag"); code != 2 || !strings.Contains(errOut, "no-such-flag") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// No DVM in an empty rendezvous directory: a clear failure, exit 1.
func TestNoDVM(t *testing.T) {
	t.Setenv("DYNRT_DIR", filepath.Join(t.TempDir(), "d"))
	t.Setenv("DYNRT_DVM", "")
	code, out, errOut := runMain("list")
	if code != 1 || out != "" || !strings.Contains(errOut, "dynrc: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Usage errors are found before anything is sent: exit 2 and no request.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		frag string
	}{
		{[]string{"add"}, "add needs -n N"},
		{[]string{"add", "-n", "0"}, "-n must be a positive number"},
		{[]string{"add", "-n", "-3"}, "-n must be a positive number"},
		{[]string{"add", "-n", "2", "extra"}, `unexpected argument "extra"`},
		{[]string{"add", "-n", "x"}, "invalid value"},
		{[]string{"add", "-n", "1000000000"}, "limit procs-per-change of 65536"},
		{[]string{"add", "-n", "4294967297"}, "limit procs-per-change"},
		{[]string{"add", "-n", "2", "--ranks", "1"}, "flag provided but not defined"},
		{[]string{"sub"}, "sub needs -n N or --ranks LIST"},
		{[]string{"sub", "-n", "2", "--ranks", "1"}, "either -n or --ranks"},
		{[]string{"sub", "--ranks", "3,,4"}, "empty item"},
		{[]string{"sub", "--ranks", "7-5"}, "reversed"},
		{[]string{"sub", "--ranks", "1,1"}, "named twice"},
		{[]string{"sub", "--ranks", "a"}, `"a" is not a rank`},
		{[]string{"replace"}, "replace needs -n N or --ranks LIST"},
		{[]string{"replace", "-n", "1", "--ranks", "2"}, "either -n or --ranks"},
		{[]string{"sub", "--ranks", ""}, "empty rank list"},
		{[]string{"add", "-n", "1", "--timeout", "-1s"}, "--timeout must be positive"},
		{[]string{"sub", "-n", "1", "--grace", "0s"}, "--grace must be at least 1ms"},
		{[]string{"add", "-n", "1", "--confirm-timeout", "-2s"}, "--confirm-timeout must be at least 1ms"},
		{[]string{"add", "-n", "1", "--grace", "1s"}, "flag provided but not defined"},
		{[]string{"show"}, "missing DELTA"},
		{[]string{"show", "a", "b"}, `unexpected argument "b"`},
		{[]string{"wait", "d", "--status", "pending"}, "want finalized or aborted"},
		{[]string{"cancel"}, "missing DELTA"},
		{[]string{"list", "x"}, `unexpected argument "x"`},
		{[]string{"script", "a", "b"}, `unexpected argument "b"`},
		{[]string{"nosuch"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFake(job(1, "ns1", "app", 4))
			code, out, errOut := runFake(f, tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stdout %q, stderr %q)", code, out, errOut)
			}
			if !strings.Contains(errOut, tt.frag) {
				t.Errorf("stderr %q lacks %q", errOut, tt.frag)
			}
			if len(f.reqs) != 0 || f.connects != 0 {
				t.Errorf("%d requests sent, %d connects, want none", len(f.reqs), f.connects)
			}
		})
	}
}

func TestFlagsFirst(t *testing.T) {
	app := &cli.App{
		Flags:    []cli.Flag{dvmFlag()},
		Commands: []*cli.Command{{Name: "show", Flags: []cli.Flag{jobFlag(), jsonFlag()}}},
	}
	tests := []struct{ in, want string }{
		{"show 3 --json", "show --json 3"},
		{"--dvm x show 3 -j app --json", "--dvm x show -j app --json 3"},
		{"--dvm=x show 3 --job=app", "--dvm=x show --job=app 3"},
		{"show 3 -- --json", "show 3 -- --json"},
		{"show - --json", "show --json -"},
		{"show 3 --job", "show --job 3"}, // value missing: then DELTA is missing, a usage error either way
		{"nosuch 3 --json", "nosuch 3 --json"},
		{"--dvm", "--dvm"},
	}
	for _, tt := range tests {
		got := strings.Join(flagsFirst(app, append([]string{"dynrc"}, strings.Fields(tt.in)...))[1:], " ")
		if got != tt.want {
			t.Errorf("flagsFirst(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseRanks(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"3", "3", ""},
		{"3,5-7", "3,5-7", ""},
		{" 7 , 1-2 ,4", "1-2,4,7", ""},
		{"0-0", "0", ""},
		{"4294967295", "4294967295", ""},
		{"", "", "empty rank list"},
		{",", "", "empty item"},
		{"1,", "", "empty item"},
		{"-3", "", `"" is not a rank`},
		{"3-", "", `"" is not a rank`},
		{"1-2-3", "", "is not a rank"},
		{"4294967296", "", "is not a rank"},
		{"5-3", "", "reversed"},
		{"1-3,2", "", "rank 2 named twice"},
		{"0-4000000000", "", "too long"},
	}
	for _, tt := range tests {
		got, err := parseRanks(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseRanks(%q): error %v, want one containing %q", tt.in, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("parseRanks(%q): %v", tt.in, err)
		case tt.err == "" && got.String() != tt.want:
			t.Errorf("parseRanks(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestJobSelection(t *testing.T) {
	two := []wire.JobInfo{job(1, "ns1", "alpha", 4), job(2, "ns2", "beta", 8)}
	tests := []struct {
		name    string
		jobs    []wire.JobInfo
		args    []string
		code    int
		wantJob string
		frag    string
	}{
		{"only job", two[:1], []string{"add", "-n", "1"}, 0, "ns1", ""},
		{"no job", nil, []string{"add", "-n", "1"}, 1, "", "no job runs on this DVM"},
		{"two jobs", two, []string{"add", "-n", "1"}, 2, "", "the DVM runs 2 jobs, pick one with --job: ns1 (job 1, app alpha, 4 procs), ns2 (job 2, app beta, 8 procs)"},
		{"by namespace", two, []string{"add", "-n", "1", "--job", "ns2"}, 0, "ns2", ""},
		{"by app", two, []string{"add", "-n", "1", "-j", "beta"}, 0, "ns2", ""},
		{"by number", two, []string{"add", "-n", "1", "--job", "1"}, 0, "ns1", ""},
		{"unknown", two, []string{"add", "-n", "1", "--job", "gamma"}, 1, "", `unknown job "gamma"; running: ns1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(tt.jobs...)
			code, _, errOut := runFake(f, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.frag) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errOut, tt.frag)
			}
			if tt.wantJob == "" {
				if len(f.reqs) != 0 {
					t.Fatalf("requests sent: %+v", f.reqs)
				}
				return
			}
			if len(f.reqs) != 1 || f.reqs[0].Job != tt.wantJob {
				t.Fatalf("requests %+v, want one for %s", f.reqs, tt.wantJob)
			}
		})
	}
}

func TestSelectDVM(t *testing.T) {
	for _, args := range [][]string{
		{"--dvm", "mydvm", "list"},
		{"list", "--dvm", "mydvm"},
	} {
		f := newFake(job(1, "ns1", "app", 4))
		if code, _, errOut := runFake(f, args...); code != 0 || f.sel != "mydvm" {
			t.Errorf("%q: exit %d (%s), connect saw --dvm %q", args, code, errOut, f.sel)
		}
		if f.closes != f.connects {
			t.Errorf("%q: %d connects, %d closes", args, f.connects, f.closes)
		}
	}
}

func TestAddSubRequests(t *testing.T) {
	f := newFake(job(1, "ns1", "app", 4))
	code, out, errOut := runFake(f, "add", "-n", "2", "--pset", "mpi://app/app/left")
	if code != 0 || errOut != "" {
		t.Fatalf("add: exit %d, stderr %q", code, errOut)
	}
	if want := "mpi://rte/app/rc/1  ADD 2 (ranks 4-5)  ANNOUNCED\n"; out != want {
		t.Errorf("add printed %q, want %q", out, want)
	}
	r := f.reqs[0]
	if r.Type != wire.RCAdd || r.N != 2 || r.Job != "ns1" || r.Requester != wire.ByTool || r.RequesterID != "dynrc pid 4242" ||
		len(r.Bound) != 1 || r.Bound[0] != "mpi://app/app/left" || r.Wait || len(r.Ranks) != 0 {
		t.Errorf("add request %+v", r)
	}
	if code, _, errOut := runFake(f, "wait", "mpi://rte/app/rc/1"); code != 0 {
		t.Fatalf("wait: exit %d, %s", code, errOut)
	}
	code, out, errOut = runFake(f, "sub", "--ranks", "1,3-4", "--grace", "1.5s", "--confirm-timeout", "2s", "--pset", "mpi://app/app/right")
	if code != 0 || !strings.Contains(out, "SUB 3 (ranks 1,3-4)  ANNOUNCED") {
		t.Fatalf("sub --ranks: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	r = f.reqs[1]
	if r.Type != wire.RCSub || r.N != 3 || r.Ranks.String() != "1,3-4" || len(r.Bound) != 1 || r.Bound[0] != "mpi://app/app/right" ||
		r.GraceMS != 1500 || r.ConfirmMS != 2000 {
		t.Errorf("sub request %+v", r)
	}
}

// Errors of the master map to exit statuses, with its message.
func TestChangeOutcomes(t *testing.T) {
	tests := []struct {
		name  string
		fates []string
		prep  []string // a command run first
		args  []string
		code  int
		out   string
		err   string
	}{
		{"accepted", nil, nil, []string{"add", "-n", "2"}, 0, "ANNOUNCED", ""},
		{"finalized", nil, nil, []string{"add", "-n", "2", "--wait"}, 0, "ADD 2 (ranks 4-5)  FINALIZED after 31.000 ms", ""},
		{"sub exited", nil, nil, []string{"sub", "-n", "2", "-w"}, 0, "SUB 2 (ranks 2-3)  FINALIZED after 35.000 ms", ""},
		{"aborted", []string{wire.RCAborted}, nil, []string{"add", "-n", "2", "--wait"}, 1,
			"ABORTED after 40.000 ms: confirm timeout (30s)", "mpi://rte/app/rc/1 was aborted: confirm timeout (30s)"},
		{"timeout", []string{""}, nil, []string{"add", "-n", "2", "--wait", "--timeout", "20ms"}, 3,
			"ANNOUNCED", "waiting for mpi://rte/app/rc/1: timed out (--timeout); the change goes on"},
		{"busy", []string{""}, []string{"add", "-n", "1"}, []string{"sub", "-n", "1"}, 4, "",
			"sub 1: job ns1: resource change mpi://rte/app/rc/1 (ADD, ANNOUNCED) is still in flight"},
		{"sub all", nil, nil, []string{"sub", "-n", "4"}, 1, "", "cannot remove 4 of its 4 processes"},
		{"ranks not in job", nil, nil, []string{"sub", "--ranks", "2,9"}, 1, "", "job ns1 has no rank 9"},
		{"not malleable", nil, nil, []string{"add", "-n", "1", "--pset", "mpi://app/app/fixed"}, 1, "", "pset mpi://app/app/fixed is not malleable"},
		{"queued", []string{""}, []string{"add", "-n", "1"}, []string{"add", "-n", "1", "--queue"}, 0, "job ns1  ADD 1  NULL (queued)", ""},
		{"queued wait", []string{"", wire.RCFinalized}, []string{"add", "-n", "1"}, []string{"add", "-n", "1", "--queue", "--wait"}, 0, "mpi://rte/app/rc/2  ADD 1 (ranks 5)  FINALIZED", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(job(1, "ns1", "app", 4))
			f.fates = tt.fates
			if tt.prep != nil {
				if code, _, errOut := runFake(f, tt.prep...); code != 0 {
					t.Fatalf("%q: exit %d: %s", tt.prep, code, errOut)
				}
			}
			code, out, errOut := runFake(f, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tt.code, out, errOut)
			}
			if !strings.Contains(out, tt.out) || (tt.out == "" && out != "") {
				t.Errorf("stdout %q, want %q", out, tt.out)
			}
			if !strings.Contains(errOut, tt.err) || (tt.err == "" && errOut != "") {
				t.Errorf("stderr %q, want %q", errOut, tt.err)
			}
			if last := f.reqs[len(f.reqs)-1]; last.Queue != slices.Contains(tt.args, "--queue") {
				t.Errorf("request Queue %v", last.Queue)
			}
			if strings.Contains(errOut, "master: ") {
				t.Errorf("stderr keeps the library prefix: %q", errOut)
			}
		})
	}
}

// --wait waits until the change is settled (a SUB: its processes gone),
// and its JSON then holds the exit time.
func TestSubWaitsForExits(t *testing.T) {
	f := newFake(job(1, "ns1", "app", 8))
	code, out, _ := runFake(f, "sub", "-n", "3", "--wait", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc rcJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.ElapsedMS["all_exited"]; !ok || !doc.Settled || len(f.waits) != 1 || f.waits[0] != "" {
		t.Fatalf("waits %q, document %+v", f.waits, doc)
	}
}

func TestWaitStatus(t *testing.T) {
	tests := []struct {
		fate, status string
		code         int
	}{
		{wire.RCFinalized, "", 0},
		{wire.RCFinalized, "finalized", 0},
		{wire.RCFinalized, "ABORTED", 1},
		{wire.RCAborted, "", 1},
		{wire.RCAborted, "aborted", 0},
	}
	for _, tt := range tests {
		f := newFake(job(1, "ns1", "app", 4))
		f.fates = []string{tt.fate}
		runFake(f, "add", "-n", "1")
		args := []string{"wait", "1"}
		if tt.status != "" {
			args = append(args, "--status", tt.status)
		}
		code, out, errOut := runFake(f, args...)
		if code != tt.code || !strings.Contains(out, tt.fate) {
			t.Errorf("fate %s, %q: exit %d (want %d), stdout %q, stderr %q", tt.fate, args, code, tt.code, out, errOut)
		}
	}
	f := newFake(job(1, "ns1", "app", 4))
	if code, _, errOut := runFake(f, "wait", "mpi://rte/app/rc/7"); code != 1 || !strings.Contains(errOut, "no resource change mpi://rte/app/rc/7") {
		t.Errorf("unknown delta: exit %d, stderr %q", code, errOut)
	}
}

func TestCancel(t *testing.T) {
	f := newFake(job(1, "ns1", "app", 4))
	f.fates = []string{""}
	runFake(f, "add", "-n", "1")
	code, out, errOut := runFake(f, "cancel", "1")
	if code != 0 || out != "mpi://rte/app/rc/1  ADD 1 (ranks 4)  ABORTED after 5.000 ms: canceled by dynrc pid 4242\n" {
		t.Fatalf("cancel: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runFake(f, "cancel", "mpi://rte/app/rc/1")
	if code != 1 || !strings.Contains(errOut, "cancel mpi://rte/app/rc/1: resource change mpi://rte/app/rc/1 is already ABORTED") {
		t.Fatalf("second cancel: exit %d, stderr %q", code, errOut)
	}
	// The job is free again: a new change is accepted.
	if code, _, errOut := runFake(f, "add", "-n", "1"); code != 0 {
		t.Fatalf("add after cancel: exit %d, %s", code, errOut)
	}
}

// An interrupt while waiting exits 130 and says the change goes on.
func TestInterrupt(t *testing.T) {
	f := newFake(job(1, "ns1", "app", 4))
	f.fates = []string{""}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		for {
			f.mu.Lock()
			n := len(f.rcs)
			f.mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel(errors.New("interrupt signal received"))
	}()
	code, _, errOut := runFakeCtx(ctx, f, "", "add", "-n", "1", "--wait")
	if code != exitInterrupt || !strings.Contains(errOut, "interrupted; the change goes on") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// finishedFake has an ADD finalized, a SUB finalized with its exits, and
// an aborted ADD, with deterministic timestamps.
func finishedFake(t *testing.T) *fakeMaster {
	f := newFake(job(1, "ns1", "app", 4))
	f.fates = []string{wire.RCFinalized, wire.RCFinalized, wire.RCAborted}
	for _, args := range [][]string{
		{"add", "-n", "2", "--wait"}, {"sub", "--ranks", "1,5", "--wait"}, {"add", "-n", "28", "--wait"},
	} {
		runFake(f, args...)
	}
	if len(f.rcs) != 3 {
		t.Fatalf("%d changes", len(f.rcs))
	}
	return f
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update if intended):\n--- got\n%s--- want\n%s", p, got, want)
	}
}

func TestShowGolden(t *testing.T) {
	f := finishedFake(t)
	var all strings.Builder
	for _, d := range []string{"1", "2", "mpi://rte/app/rc/3"} {
		code, out, errOut := runFake(f, "show", d)
		if code != 0 {
			t.Fatalf("show %s: exit %d, %s", d, code, errOut)
		}
		all.WriteString(out + "\n")
	}
	golden(t, "show.golden", all.String())
	code, out, _ := runFake(f, "show", "1", "--json")
	if code != 0 {
		t.Fatalf("show --json: exit %d", code)
	}
	golden(t, "show.json.golden", out)
	if code, _, errOut := runFake(f, "show", "9"); code != 1 || !strings.Contains(errOut, "show mpi://rte/app/rc/9: no resource change mpi://rte/app/rc/9") {
		t.Errorf("show of an unknown delta: exit %d, stderr %q", code, errOut)
	}
}

func TestListGolden(t *testing.T) {
	f := newFake(job(1, "ns1", "app", 4))
	if code, out, _ := runFake(f, "list"); code != 0 || out != "no resource changes\n" {
		t.Fatalf("empty list: exit %d, %q", code, out)
	}
	if code, out, _ := runFake(f, "list", "--json"); code != 0 || out != "[]\n" {
		t.Fatalf("empty list --json: exit %d, %q", code, out)
	}
	f = finishedFake(t)
	code, out, _ := runFake(f, "list")
	if code != 0 {
		t.Fatalf("list: exit %d", code)
	}
	golden(t, "list.golden", out)
	code, out, _ = runFake(f, "list", "--job", "app", "--json")
	if code != 0 {
		t.Fatalf("list --json: exit %d", code)
	}
	var docs []map[string]any
	if err := json.Unmarshal([]byte(out), &docs); err != nil || len(docs) != 3 {
		t.Fatalf("list --json: %v, %d docs", err, len(docs))
	}
}

// The JSON shape is an interface: these keys must be there, with the
// values the record holds.
func TestJSONShape(t *testing.T) {
	f := finishedFake(t)
	_, out, _ := runFake(f, "show", "2", "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"delta", "job", "type", "status", "n", "ranks", "bound", "requester", "placement", "accepts", "steps", "elapsed_ms", "total_ms"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("key %q missing in %s", k, out)
		}
	}
	el := doc["elapsed_ms"].(map[string]any)
	if doc["type"] != "SUB" || doc["ranks"] != "1,5" || el["announced"] != 0.6 || el["all_exited"] != 35.0 || doc["total_ms"] != 35.0 {
		t.Errorf("values: %s", out)
	}
	steps := doc["steps"].([]any)
	first, last := steps[0].(map[string]any), steps[len(steps)-1].(map[string]any)
	if first["step"] != "requested" || last["step"] != "all_exited" || last["since_prev_ms"] != 4.0 {
		t.Errorf("steps: %v ... %v", first, last)
	}
}

// TestFailureCauseGolden: a failure change (made by the runtime under
// --on-failure shrink) shows its cause in list, show and show --json.
func TestFailureCauseGolden(t *testing.T) {
	f := finishedFake(t)
	f.fates = []string{wire.RCFinalized}
	runFake(f, "sub", "--ranks", "3", "--wait")
	last := &f.rcs[len(f.rcs)-1].rc
	last.Requester, last.RequesterID = wire.ByRuntime, "failure policy shrink"
	last.Cause = &wire.RCCause{Kind: wire.CauseFailure, Ranks: wire.Span(3, 3), Why: []string{"rank 3 on node1 killed by signal 9"}}
	var all strings.Builder
	for _, args := range [][]string{{"list"}, {"show", "4"}, {"show", "4", "--json"}} {
		code, out, errOut := runFake(f, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
		all.WriteString(out + "\n")
	}
	golden(t, "failure.golden", all.String())
}
