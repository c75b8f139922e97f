package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

func TestParseScript(t *testing.T) {
	src := `# grow, then shrink
add 28
WAIT            # comments after commands too

sub ranks 3, 5-7
wait aborted
add 2 pset mpi://app/a/left
cancel
sleep 2s
sleep 0.5
sub 4
sub 2 pset mpi://app/a/right
`
	lines, err := parseScript(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []scriptLine{
		{No: 2, Text: "add 28", Op: opAdd, N: 28},
		{No: 3, Text: "WAIT", Op: opWait, Status: wire.RCFinalized},
		{No: 5, Text: "sub ranks 3, 5-7", Op: opSub, N: 4, Ranks: wire.RankRanges{{Lo: 3, Hi: 3}, {Lo: 5, Hi: 7}}},
		{No: 6, Text: "wait aborted", Op: opWait, Status: wire.RCAborted},
		{No: 7, Text: "add 2 pset mpi://app/a/left", Op: opAdd, N: 2, Pset: "mpi://app/a/left"},
		{No: 8, Text: "cancel", Op: opCancel},
		{No: 9, Text: "sleep 2s", Op: opSleep, Dur: 2 * time.Second},
		{No: 10, Text: "sleep 0.5", Op: opSleep, Dur: 500 * time.Millisecond},
		{No: 11, Text: "sub 4", Op: opSub, N: 4},
		{No: 12, Text: "sub 2 pset mpi://app/a/right", Op: opSub, N: 2, Pset: "mpi://app/a/right"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i := range want {
		g, w := lines[i], want[i]
		if g.No != w.No || g.Text != w.Text || g.Op != w.Op || g.N != w.N || g.Ranks.String() != w.Ranks.String() ||
			g.Pset != w.Pset || g.Status != w.Status || g.Dur != w.Dur {
			t.Errorf("line %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		src  string
		want string
	}{
		{"wait\nadd 1", "line 1: wait: no add or sub before it"},
		{"\n\ncancel", "line 3: cancel: no add or sub before it"},
		{"add 1\ngrow 2", `line 2: unknown command "grow"`},
		{"add 0", `line 1: add: "0" is not a positive number of processes`},
		{"add -1", `line 1: add: "-1" is not a positive number`},
		{"add", "line 1: add: want 'add N' or 'add N pset P'"},
		{"add 2 3", "line 1: add: want"},
		{"sub", "line 1: sub: want 'sub N', 'sub N pset P' or 'sub ranks LIST'"},
		{"sub 2 set x", "line 1: sub: want"},
		{"sub ranks", "line 1: sub ranks: missing the rank LIST"},
		{"sub ranks 4-2", "line 1: sub: rank list \"4-2\": range 4-2 is reversed"},
		{"sub ranks 1,,2", "empty item"},
		{"add 1\nwait pending", "line 2: wait: want"},
		{"add 1\ncancel now", "line 2: cancel takes no argument"},
		{"sleep", "line 1: sleep: want"},
		{"sleep soon", `line 1: sleep: "soon" is not a duration`},
		{"sleep -1s", "out of range"},
		{"sleep 2h", "out of range"},
		// Every bad line is reported, in order.
		{"add x\nsub 2\nfoo\nsleep 1s\nwait 3", "line 1: add: \"x\" is not a positive number of processes\nline 3: unknown command \"foo\" (want add, sub, wait, cancel or sleep)\nline 5: wait: want"},
	}
	for _, tt := range tests {
		_, err := parseScript(strings.NewReader(tt.src))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseScript(%q): %v, want %q", tt.src, err, tt.want)
		}
	}
	var many strings.Builder
	for range 30 {
		many.WriteString("bad\n")
	}
	_, err := parseScript(strings.NewReader(many.String()))
	if err == nil || strings.Count(err.Error(), "\n") != maxScriptErrors-1 {
		t.Errorf("30 bad lines: %v", err)
	}
}

func TestScriptRunGolden(t *testing.T) {
	f := newFake(job(1, "ns1", "app", 28))
	f.fates = []string{wire.RCFinalized, wire.RCFinalized, wire.RCAborted, "", wire.RCFinalized}
	src := `# a scripted scenario
add 28
wait
sub ranks 3,4
wait
add 8
wait aborted
sleep 2s
add 1
cancel
sub 2
wait
`
	code, out, errOut := runFakeCtx(t.Context(), f, src, "script")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	golden(t, "script.golden", out)
	if len(f.reqs) != 5 || f.reqs[1].Ranks.String() != "3-4" || f.reqs[0].RequesterID != "dynrc script pid 4242" {
		t.Errorf("requests %+v", f.reqs)
	}
}

// The script stops at the first failure, with its exit status and line.
func TestScriptFailures(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		fates []string
		code  int
		err   string
		reqs  int
	}{
		{"busy", "add 1\nadd 1\nwait", []string{""}, 4,
			"script line 2 (add 1): job ns1: resource change mpi://rte/app/rc/1 (ADD, ANNOUNCED) is still in flight", 2},
		{"aborted", "add 1\nwait\nsub 1", []string{wire.RCAborted}, 1,
			"script line 2 (wait): mpi://rte/app/rc/1 was aborted: confirm timeout (30s)", 1},
		{"finalized though abort awaited", "add 1\nwait aborted", nil, 1,
			"script line 2 (wait aborted): mpi://rte/app/rc/1 ended FINALIZED, not ABORTED", 1},
		{"timeout", "add 1\n\n# hangs\nwait", []string{""}, 3,
			"script line 4 (wait): timed out (--timeout); the change goes on", 1},
		{"invalid", "sub 28\nwait", nil, 1, "script line 1 (sub 28): job ns1: cannot remove 28 of its 28 processes", 1},
		{"bad line", "add 1\nwait\nadd x", nil, 2, "script stdin:\nline 3: add:", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(job(1, "ns1", "app", 28))
			f.fates = tt.fates
			code, out, errOut := runFakeCtx(t.Context(), f, tt.src, "script", "--timeout", "30ms")
			if code != tt.code || !strings.Contains(errOut, tt.err) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)\n%s", code, tt.code, errOut, tt.err, out)
			}
			if len(f.reqs) != tt.reqs {
				t.Errorf("%d requests, want %d", len(f.reqs), tt.reqs)
			}
			if tt.reqs > 0 && !strings.Contains(out, "-> FAILED: ") {
				t.Errorf("no FAILED line in\n%s", out)
			}
		})
	}
}

func TestScriptFromFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.rc")
	if err := os.WriteFile(p, []byte("add 2\nwait\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFake(job(1, "ns1", "app", 4))
	code, out, errOut := runFake(f, "script", "--job", "app", p)
	if code != 0 || !strings.Contains(out, "script done: 2 commands, 1 changes") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runFake(f, "script", filepath.Join(t.TempDir(), "none")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: exit %d, %q", code, errOut)
	}
	if code, out, _ := runFakeCtx(t.Context(), f, "# nothing\n\n", "script", "-"); code != 0 || out != "script: nothing to do\n" {
		t.Fatalf("empty script: exit %d, %q", code, out)
	}
}
