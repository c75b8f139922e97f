package mpichsuite

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// sample: one test of each comparison case, with two builds.
func sample() []Result {
	pass := Verdict{Kind: Pass}
	fail := Verdict{Kind: Fail, Reason: "exit status 1"}
	hang := Verdict{Kind: Timeout, Reason: "killed at the time limit"}
	spawn1 := Test{Dir: "spawn", Name: "spawn1", NP: 1}
	conacc := Test{Dir: "spawn", Name: "spaconacc", NP: 1}
	die := Test{Dir: "ft", Name: "die", NP: 4, XFail: "ticket2237"}
	spawnD := Test{Dir: "spawn", Name: "spawn1", NP: 1}
	multi := Test{Dir: "pt2pt", Name: "sendrecv3", NP: 2, Args: []string{"-isendrecv"}}
	ftdie := Test{Dir: "ft", Name: "senddead", NP: 2, ResultTest: ResultTestStatusNoErrors}
	tmo := Test{Dir: "init", Name: "timeout", NP: 2, ResultTest: ResultTestErrFatal}
	atLimit := Verdict{Kind: Pass, AtLimit: true}
	var rs []Result
	add := func(b string, t Test, h, p, w Verdict) {
		rs = append(rs,
			Result{b, t, Hydra, h, 500 * time.Millisecond, 1},
			Result{b, t, DynrunPrivate, p, 600 * time.Millisecond, 1},
			Result{b, t, DynrunWarm, w, 200 * time.Millisecond, 1})
	}
	add("ch3-pmi1", spawn1, pass, pass, pass)       // same
	add("ch3-pmi1", conacc, pass, hang, fail)       // differs under both dynrun runners
	add("ch3-pmi1", die, fail, hang, pass)          // Hydra fails: no difference either way
	add("ch3-pmi1", multi, pass, pass, fail)        // differs under warm only
	add("ch3-pmi1", ftdie, pass, atLimit, pass)     // hangs until the limit under private only
	add("ch3-pmi1", tmo, atLimit, atLimit, atLimit) // meant to run into the limit
	add("debian", spawnD, fail, fail, fail)         // cannot spawn anywhere
	// Over the hosts: dynrun-hosts is compared with hydra-hosts.
	shm := Test{Dir: "rma", Name: "win_shared_create_allocshm", NP: 4}
	put := Test{Dir: "rma", Name: "win_shared_noncontig_put", NP: 4}
	hostsAdd := func(t Test, h, p, w, hh, dh Verdict) {
		add("ch3-pmi1", t, h, p, w)
		rs = append(rs, Result{"ch3-pmi1", t, HydraHosts, hh, 300 * time.Millisecond, 1},
			Result{"ch3-pmi1", t, DynrunHosts, dh, 400 * time.Millisecond, 1})
	}
	hostsAdd(shm, pass, pass, pass, hang, hang) // fails over hosts under both: no difference
	hostsAdd(put, hang, hang, hang, pass, fail) // passes over hosts under Hydra only: a difference
	return rs
}

func TestDifferences(t *testing.T) {
	var got []string
	for _, d := range Differences(sample()) {
		got = append(got, d.String())
	}
	want := []string{
		"ch3-pmi1 dynrun-private spawn/spaconacc 1: timeout (killed at the time limit)",
		"ch3-pmi1 dynrun-warm spawn/spaconacc 1: fail (exit status 1)",
		"ch3-pmi1 dynrun-warm pt2pt/sendrecv3 2 -isendrecv: fail (exit status 1)",
		"ch3-pmi1 dynrun-private ft/senddead 2: pass@limit (passed only when the time limit ended it (hydra: 0.5s))",
		"ch3-pmi1 dynrun-hosts rma/win_shared_noncontig_put 4: fail (exit status 1)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestReference(t *testing.T) {
	all := func(Runner) bool { return true }
	noHydraHosts := func(r Runner) bool { return r != HydraHosts }
	cases := []struct {
		r    Runner
		have func(Runner) bool
		want Runner
	}{
		{DynrunPrivate, all, Hydra},
		{DynrunWarm, all, Hydra},
		{DynrunHosts, all, HydraHosts},
		{DynrunHosts, noHydraHosts, Hydra}, // Hydra on one host stands in
		{Hydra, all, Hydra},
		{HydraHosts, all, HydraHosts},
	}
	for _, c := range cases {
		if got := c.r.Reference(c.have); got != c.want {
			t.Errorf("%s.Reference = %s, want %s", c.r, got, c.want)
		}
	}
	if got := Sorted([]Runner{DynrunHosts, "x", Hydra, HydraHosts, Hydra}); fmt.Sprint(got) != "[hydra hydra-hosts dynrun-hosts x]" {
		t.Errorf("Sorted = %v", got)
	}
}

func TestReportGolden(t *testing.T) {
	rs := sample()
	var b strings.Builder
	if err := Table(&b, rs); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	builds := SortedBuilds(rs)
	Summary(&b, builds, rs)
	WriteTotals(&b, builds, rs)
	b.WriteString("\n")
	if err := WriteTSV(&b, rs); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden", []byte(b.String()))

	c := Counts(rs)["ch3-pmi1"]
	if h := c[Hydra]; h.Passed != 6 || h.Failed != 2 || h.XFailed != 1 {
		t.Errorf("hydra ch3-pmi1 count %+v, want 6 passed, 2 failed, 1 of them xfail", h)
	}
	if p := c[DynrunPrivate]; p.Passed != 5 || p.Failed != 3 || p.XFailed != 1 {
		t.Errorf("dynrun-private ch3-pmi1 count %+v, want 5 passed, 3 failed, 1 xfail", p)
	}
}

func TestSelect(t *testing.T) {
	tests := []Test{{Dir: "a", Name: "x", NP: 1}, {Dir: "a", Name: "y", NP: 2}, {Dir: "b", Name: "x", NP: 3}, {Dir: "a", Name: "x", NP: 4}}
	got, err := Select(tests, []string{"a/x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].NP != 1 || got[1].NP != 4 {
		t.Errorf("Select a/x = %+v, want both lines of a/x in order", got)
	}
	if _, err := Select(tests, []string{"a/x", "c/z"}); err == nil || !strings.Contains(err.Error(), "c/z") {
		t.Errorf("a name matching nothing: err %v, want one naming c/z", err)
	}
	if _, err := Subset("nope"); err == nil || !strings.Contains(err.Error(), "ci, fast") {
		t.Errorf("unknown subset: err %v, want the list of subsets", err)
	}
	if d := Dirs([]string{"init/a", "spawn/b", "init/c"}); strings.Join(d, ",") != "init,spawn" {
		t.Errorf("Dirs = %v", d)
	}
}

// A result file reads back as it was written (the journal of a run cut
// short too), and what cannot be a result file is an error naming the line.
func TestReadTSV(t *testing.T) {
	var b strings.Builder
	if err := WriteTSV(&b, sample()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTSV(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if len(got) != len(want) {
		t.Fatalf("read %d results, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if Key(g.Build, g.Test, g.Runner, g.Try) != Key(w.Build, w.Test, w.Runner, w.Try) || g.Verdict != w.Verdict || g.Elapsed != w.Elapsed || g.Test.XFail != w.Test.XFail {
			t.Errorf("result %d: read %+v, wrote %+v", i, g, w)
		}
	}
	var d1, d2 []string
	for _, d := range Differences(want) {
		d1 = append(d1, d.String())
	}
	for _, d := range Differences(got) {
		d2 = append(d2, d.String())
	}
	if strings.Join(d1, "\n") != strings.Join(d2, "\n") {
		t.Errorf("differences after reading back:\n%s\nwant:\n%s", strings.Join(d2, "\n"), strings.Join(d1, "\n"))
	}

	full := b.String()
	cut := full[:len(full)-10] // a journal whose last line was being written
	if rs, err := ReadTSV(strings.NewReader(cut)); err != nil || len(rs) != len(want)-1 {
		t.Errorf("journal cut short: %d results, err %v; want %d and no error", len(rs), err, len(want)-1)
	}
	lines := strings.Split(full, "\n")
	for _, tc := range []struct{ name, text, want string }{
		{"no header", strings.Join(lines[1:], "\n"), "not a result file"},
		{"empty", "", "not a result file"},
		{"bad verdict", strings.Join(append([]string{lines[0], strings.Replace(lines[1], "\tpass\t", "\tgreat\t", 1)}, lines[2:]...), "\n"), `line 2: verdict "great"`},
		{"bad np", strings.Join(append([]string{lines[0], strings.Replace(lines[1], "\t1\t", "\tx\t", 1)}, lines[2:]...), "\n"), `line 2: process count "x"`},
		{"short line", strings.Join(append([]string{lines[0], "a\tb"}, lines[1:]...), "\n"), "line 2: 2 fields"},
	} {
		if _, err := ReadTSV(strings.NewReader(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
