package mpichsuite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tries builds a pair from two strings of verdicts, one letter a try: p
// pass, f fail, t timeout, l pass at the time limit.
func tries(ref, dyn string) Pair {
	t := Test{Dir: "ft", Name: "agree_shrink", NP: 4}
	conv := func(rn Runner, s string) []Result {
		var out []Result
		for i, c := range s {
			v := map[rune]Verdict{
				'p': {Kind: Pass},
				'f': {Kind: Fail, Reason: "exit status 101"},
				't': {Kind: Timeout, Reason: "killed at the time limit"},
				'l': {Kind: Pass, AtLimit: true},
			}[c]
			out = append(out, Result{Build: "ch3-pmi1", Test: t, Runner: rn, Verdict: v, Elapsed: time.Second, Try: i + 1})
		}
		return out
	}
	return Pair{Build: "ch3-pmi1", Test: t, Runner: DynrunWarm, Ref: Hydra, Tries: conv(DynrunWarm, dyn), RefTries: conv(Hydra, ref)}
}

func TestOutcome(t *testing.T) {
	cases := []struct {
		ref, dyn string
		want     Outcome
		counts   string
	}{
		{"p", "p", Agree, "hydra 1/1, dynrun-warm 1/1"},
		{"f", "t", Agree, "hydra 0/1, dynrun-warm 0/1"},
		{"l", "l", Agree, "hydra 1/1, dynrun-warm 1/1"}, // meant to run into the limit (init/timeout)
		{"p", "f", Differs, "hydra 1/1, dynrun-warm 0/1"},
		{"p", "l", Differs, "hydra 1/1, dynrun-warm 0/1"}, // hung until the limit where Hydra did not
		{"pppp", "fppp", Differs, "hydra 4/4, dynrun-warm 3/4"},
		{"pppp", "tttt", Differs, "hydra 4/4, dynrun-warm 0/4"},
		{"pfpp", "fpff", Flaky, "hydra 3/4, dynrun-warm 1/4"},
		{"pf", "fp", Flaky, "hydra 1/2, dynrun-warm 1/2"},
		{"fppp", "pppp", Flaky, "hydra 3/4, dynrun-warm 4/4"}, // only Hydra failed once
		{"pfff", "ffff", Flaky, "hydra 1/4, dynrun-warm 0/4"},
		{"ffff", "pfff", DynrunOnly, "hydra 0/4, dynrun-warm 1/4"},
		{"f", "p", DynrunOnly, "hydra 0/1, dynrun-warm 1/1"},
		{"", "p", Agree, "hydra 0/0, dynrun-warm 1/1"}, // no reference: nothing to compare
	}
	for _, c := range cases {
		p := tries(c.ref, c.dyn)
		if got := p.Outcome(); got != c.want {
			t.Errorf("reference %q, dynrun %q: %s, want %s", c.ref, c.dyn, got, c.want)
		}
		if got := p.Counts(); got != c.counts {
			t.Errorf("reference %q, dynrun %q: counts %q, want %q", c.ref, c.dyn, got, c.counts)
		}
	}
}

func TestRecheck(t *testing.T) {
	cases := []struct {
		ref, dyn string
		k        int
		want     string // "ref", "dynrun" or "done"
	}{
		{"p", "f", 0, "done"}, // no rechecks asked for
		{"p", "p", 3, "done"}, // agree
		{"f", "f", 3, "done"},
		{"p", "f", 3, "ref"}, // alternating, the reference first
		{"pp", "f", 3, "dynrun"},
		{"pp", "ff", 3, "ref"},
		{"pppp", "fff", 3, "dynrun"},
		{"pppp", "ffff", 3, "done"}, // 1+k each
		{"f", "p", 2, "ref"},
		{"pf", "fp", 3, "done"},    // both passed and failed: flaky under both
		{"pf", "ff", 3, "ref"},     // the reference is flaky; dynrun's rate is still worth knowing
		{"pppp", "f", 3, "dynrun"}, // a reference shared with another pair ran more
		{"pppp", "ff", 1, "done"},
		{"p", "ff", 3, "ref"},
	}
	for _, c := range cases {
		ref, ok := Recheck(tries(c.ref, c.dyn), c.k)
		got := "done"
		switch {
		case ok && ref:
			got = "ref"
		case ok:
			got = "dynrun"
		}
		if got != c.want {
			t.Errorf("reference %q, dynrun %q, k=%d: %s, want %s", c.ref, c.dyn, c.k, got, c.want)
		}
	}
}

// rechecked: sample with rechecks of three pairs whose first tries differ.
func rechecked() []Result {
	rs := sample()
	agree := Test{Dir: "ft", Name: "agree_shrink", NP: 4}
	revoke := Test{Dir: "ft", Name: "revoke_nofail", NP: 4, XFail: "ticket1"}
	add := func(t Test, rn Runner, try int, v Verdict) {
		rs = append(rs, Result{"ch3-pmi1", t, rn, v, time.Second, try})
	}
	pass := Verdict{Kind: Pass}
	crash := Verdict{Kind: Fail, Reason: "exit status 101"}
	hang := Verdict{Kind: Timeout, Reason: "killed at the time limit"}
	// Flaky in MPICH: Hydra 3/4, warm DVM 1/4; the private DVM agreed.
	add(agree, Hydra, 1, pass)
	add(agree, DynrunPrivate, 1, pass)
	add(agree, DynrunWarm, 1, hang)
	for i, v := range []Verdict{crash, pass, pass} {
		add(agree, Hydra, i+2, v)
		add(agree, DynrunWarm, i+2, map[bool]Verdict{true: pass, false: hang}[i == 0])
	}
	// Over hosts: only dynrun passes, in one try of two.
	add(revoke, HydraHosts, 1, crash)
	add(revoke, DynrunHosts, 1, pass)
	add(revoke, HydraHosts, 2, crash)
	add(revoke, DynrunHosts, 2, crash)
	return rs
}

func TestComparisonGolden(t *testing.T) {
	rs := rechecked()
	var b strings.Builder
	if err := Table(&b, rs); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	Summary(&b, SortedBuilds(rs), rs)
	for _, d := range Differences(rs) {
		b.WriteString("difference: " + d.String() + "\n")
	}
	WriteComparison(&b, rs)
	golden(t, "compare.golden", []byte(b.String()))
}

// A result file written before the try column (testdata/results-notry.tsv,
// the TSV of report.golden at that time) reads as first tries and gives
// the same differences; one with it reads back every try.
func TestReadTSVTries(t *testing.T) {
	old, err := os.ReadFile(filepath.Join("testdata", "results-notry.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadTSV(strings.NewReader(string(old)))
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if len(got) != len(want) {
		t.Fatalf("read %d results from the old file, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Try != 1 || Key(got[i].Build, got[i].Test, got[i].Runner, got[i].Try) != Key(want[i].Build, want[i].Test, want[i].Runner, 1) || got[i].Verdict != want[i].Verdict {
			t.Errorf("old row %d: %+v, want %+v as try 1", i, got[i], want[i])
		}
	}
	if a, b := diffStrings(Differences(got)), diffStrings(Differences(want)); a != b {
		t.Errorf("differences of the old file:\n%s\nwant:\n%s", a, b)
	}

	var b strings.Builder
	rs := rechecked()
	if err := WriteTSV(&b, rs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTSV(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		if back[i].TryNo() != rs[i].TryNo() || back[i].Verdict != rs[i].Verdict {
			t.Errorf("row %d read back as try %d %+v, want try %d %+v", i, back[i].TryNo(), back[i].Verdict, rs[i].TryNo(), rs[i].Verdict)
		}
	}
	var c1, c2 strings.Builder
	WriteComparison(&c1, rs)
	WriteComparison(&c2, back)
	if c1.String() != c2.String() || !strings.Contains(c1.String(), "hydra 3/4, dynrun-warm 1/4") {
		t.Errorf("comparison after reading back:\n%s\nwant:\n%s", c2.String(), c1.String())
	}
	for _, tc := range []struct{ name, line, want string }{
		{"bad try", strings.Replace(strings.Split(b.String(), "\n")[1], "\thydra\t1\t", "\thydra\t0\t", 1), `line 2: try "0"`},
		{"old row under the new header", strings.Split(string(old), "\n")[1], "line 2: 12 fields, want 13"},
	} {
		text := TSVHeader + "\n" + tc.line + "\n"
		if _, err := ReadTSV(strings.NewReader(text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func diffStrings(ds []Difference) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return strings.Join(out, "\n")
}
