package mpichsuite

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one test run under one runner with one MPICH build.
type Result struct {
	Build   string
	Test    Test
	Runner  Runner
	Verdict Verdict
	Elapsed time.Duration
	// Try numbers the runs of this test under this runner: 1 the first,
	// more for rechecks (Recheck); 0 reads as 1.
	Try int
}

// TryNo is r's try number, 1 for the first.
func (r Result) TryNo() int { return max(r.Try, 1) }

// Difference is a test that passed under its reference (Hydra, or
// hydra-hosts for dynrun-hosts) in every try but not under a dynrun runner
// in one at least.
type Difference struct {
	Build   string
	Test    Test
	Runner  Runner
	Ref     Runner
	Verdict Verdict // of dynrun's first failed try
	Pair    Pair
}

func (d Difference) String() string {
	s := fmt.Sprintf("%s %s %s: %s (%s)", d.Build, d.Runner, d.Test.ID(), d.Verdict.Label(d.Test), d.Verdict.Reason)
	if len(d.Pair.Tries) > 1 || len(d.Pair.RefTries) > 1 {
		s += "; " + d.Pair.Counts()
	}
	return s
}

type rowKey struct{ build, id string }

// row gathers the results of one test of one build.
type row struct {
	test  Test
	by    map[Runner]Result   // the first try
	tries map[Runner][]Result // every try, in try order
}

func rows(results []Result) ([]rowKey, map[rowKey]*row) {
	var order []rowKey
	m := map[rowKey]*row{}
	for _, r := range results {
		k := rowKey{r.Build, r.Test.ID()}
		if m[k] == nil {
			m[k] = &row{test: r.Test, by: map[Runner]Result{}, tries: map[Runner][]Result{}}
			order = append(order, k)
		}
		rw := m[k]
		rw.tries[r.Runner] = append(rw.tries[r.Runner], r)
		slices.SortStableFunc(rw.tries[r.Runner], func(a, b Result) int { return a.TryNo() - b.TryNo() })
		rw.by[r.Runner] = rw.tries[r.Runner][0]
	}
	return order, m
}

// Differences lists, in run order, every test that passed under a dynrun
// runner's reference (Runner.Reference) in every try and did not pass under
// that runner in one try at least, with the same build, or passed there only
// by lasting until the time limit: the comparison the suite is about (a
// test the reference fails may fail under dynrun too; one it passes only
// sometimes is flaky, see WriteComparison).
func Differences(results []Result) []Difference {
	var out []Difference
	for _, p := range Pairs(results) {
		if p.Outcome() != Differs {
			continue
		}
		for _, d := range p.Tries {
			if p.counts(d) {
				continue
			}
			v := d.Verdict
			if v.Passed() {
				// runtests counts it, but the job hung until the
				// launcher's time limit ended it where the
				// reference's did not.
				v.Reason = fmt.Sprintf("passed only when the time limit ended it (%s: %.1fs)", p.Ref, p.RefTries[0].Elapsed.Seconds())
			}
			out = append(out, Difference{p.Build, p.Test, p.Runner, p.Ref, v, p})
			break
		}
	}
	return out
}

// haveRunner reports whether results hold runs of a runner.
func haveRunner(results []Result) func(Runner) bool {
	seen := map[Runner]bool{}
	for _, r := range results {
		seen[r.Runner] = true
	}
	return func(r Runner) bool { return seen[r] }
}

// Count is a runner's tally with one build.
type Count struct{ Passed, Failed, XFailed int }

// Counts tallies the results' first tries per build and runner (rechecks
// are Pairs'). XFailed counts the failures of tests marked xfail= (they
// are among Failed, as runtests counts them).
func Counts(results []Result) map[string]map[Runner]Count {
	out := map[string]map[Runner]Count{}
	for _, r := range results {
		if r.TryNo() > 1 {
			continue
		}
		if out[r.Build] == nil {
			out[r.Build] = map[Runner]Count{}
		}
		c := out[r.Build][r.Runner]
		if r.Verdict.Passed() {
			c.Passed++
		} else {
			c.Failed++
			if r.Test.XFail != "" {
				c.XFailed++
			}
		}
		out[r.Build][r.Runner] = c
	}
	return out
}

func (c Count) String() string {
	return fmt.Sprintf("%d passed, %d failed of %d", c.Passed, c.Failed, c.Passed+c.Failed)
}

// Summary writes, per build (in builds order) and dynrun runner, the line
// "<build>, <runner>: dynrun: X passed, Y failed of Z; <reference>: X
// passed, Y failed of Z" (the reference: hydra, or hydra-hosts for
// dynrun-hosts), then how many failures were expected (xfail=).
func Summary(w io.Writer, builds []string, results []Result) {
	counts := Counts(results)
	have := haveRunner(results)
	for _, b := range builds {
		c, ok := counts[b]
		if !ok {
			continue
		}
		for _, rn := range Runners {
			d, ok := c[rn]
			if !ok || !rn.Dynrun() {
				continue
			}
			ref := rn.Reference(have)
			fmt.Fprintf(w, "%s, %s: dynrun: %s; %s: %s\n", b, rn, d, ref, c[ref])
		}
		var xs []string
		for _, rn := range Runners {
			if x, ok := c[rn]; ok && x.Failed > 0 {
				xs = append(xs, fmt.Sprintf("%s %d", rn, x.XFailed))
			}
		}
		if len(xs) > 0 {
			fmt.Fprintf(w, "%s: expected failures (xfail=) among the failures: %s\n", b, strings.Join(xs, ", "))
		}
	}
}

// Table writes one line per test and build: each runner's verdict and
// time in seconds of the first try, and for a rechecked runner the passes
// of all its tries ("fail 1/4").
func Table(w io.Writer, results []Result) error {
	order, m := rows(results)
	runners := present(results)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"build", "test", "np"}
	for _, rn := range runners {
		head = append(head, string(rn), "s")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, k := range order {
		rw := m[k]
		cells := []string{k.build, testCell(rw.test), strconv.Itoa(rw.test.NP)}
		for _, rn := range runners {
			r, ok := rw.by[rn]
			if !ok {
				cells = append(cells, "-", "-")
				continue
			}
			label := r.Verdict.Label(r.Test)
			if ts := rw.tries[rn]; len(ts) > 1 {
				// Rechecked: the passes of all tries.
				n := 0
				for _, t := range ts {
					if t.Verdict.Passed() {
						n++
					}
				}
				label += fmt.Sprintf(" %d/%d", n, len(ts))
			}
			cells = append(cells, label, fmt.Sprintf("%.1f", r.Elapsed.Seconds()))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// present lists the runners that have results, in table order: a run
// without a runner (RUNNERS=, or dynrun-hosts where it cannot run) gets no
// empty column for it.
func present(results []Result) []Runner {
	have := haveRunner(results)
	var out []Runner
	for _, rn := range Runners {
		if have(rn) {
			out = append(out, rn)
		}
	}
	return out
}

func testCell(t Test) string {
	s := t.Dir + "/" + t.Name
	if len(t.Args) > 0 {
		s += " " + strings.Join(t.Args, " ")
	}
	return s
}

// TSVHeader is the first line of the result file.
const TSVHeader = "build\tdir\ttest\tnp\targs\tenv\trunner\ttry\tverdict\tat_limit\txfail\tseconds\treason"

// tsvHeaderNoTry is the header of result files and journals written
// before rechecks (no try column: every row a first try); ReadTSV reads
// them too.
const tsvHeaderNoTry = "build\tdir\ttest\tnp\targs\tenv\trunner\tverdict\tat_limit\txfail\tseconds\treason"

// WriteTSV writes the results as tab-separated values, one run a line, for
// the docs and for comparing runs. Tabs and newlines in fields become
// spaces. ReadTSV reads it back.
func WriteTSV(w io.Writer, results []Result) error {
	if _, err := fmt.Fprintln(w, TSVHeader); err != nil {
		return err
	}
	for _, r := range results {
		if err := WriteTSVRow(w, r); err != nil {
			return err
		}
	}
	return nil
}

// WriteTSVRow writes one result as a line of WriteTSV (after its header).
func WriteTSVRow(w io.Writer, r Result) error {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, s)
	}
	f := []string{r.Build, r.Test.Dir, r.Test.Name, strconv.Itoa(r.Test.NP),
		strings.Join(r.Test.Args, " "), strings.Join(r.Test.Env, " "), string(r.Runner), strconv.Itoa(r.TryNo()), string(r.Verdict.Kind),
		atLimit(r.Verdict), r.Test.XFail, fmt.Sprintf("%.3f", r.Elapsed.Seconds()), r.Verdict.Reason}
	for i := range f {
		f[i] = clean(f[i])
	}
	_, err := fmt.Fprintln(w, strings.Join(f, "\t"))
	return err
}

// ReadTSV reads a result file of WriteTSV, or the journal of a run that was
// cut short (a last line without its newline was being written: dropped),
// also those written before the try column (every row a first try).
// What the file does not keep (the test's checks, time limit, ...) is zero
// in the results: they serve the table, the summary, the differences and
// resuming a run.
func ReadTSV(r io.Reader) ([]Result, error) {
	br := bufio.NewReader(r)
	var out []Result
	withTry := true
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			if n == 1 {
				return nil, fmt.Errorf("not a result file of the suite: the first line is not %q", TSVHeader)
			}
			return out, nil // a line without its newline: cut short
		}
		if err != nil {
			return nil, err
		}
		line = strings.TrimSuffix(line, "\n")
		if n == 1 {
			switch line {
			case TSVHeader:
			case tsvHeaderNoTry:
				withTry = false
			default:
				return nil, fmt.Errorf("not a result file of the suite: the first line is not %q", TSVHeader)
			}
			continue
		}
		res, err := parseRow(line, withTry)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, res)
	}
}

func parseRow(line string, withTry bool) (Result, error) {
	f := strings.Split(line, "\t")
	try := 1
	if withTry {
		if len(f) != 13 {
			return Result{}, fmt.Errorf("%d fields, want 13", len(f))
		}
		var err error
		if try, err = strconv.Atoi(f[7]); err != nil || try < 1 {
			return Result{}, fmt.Errorf("try %q", f[7])
		}
		f = slices.Delete(f, 7, 8)
	} else if len(f) != 12 {
		return Result{}, fmt.Errorf("%d fields, want 12", len(f))
	}
	np, err := strconv.Atoi(f[3])
	if err != nil || np < 1 {
		return Result{}, fmt.Errorf("process count %q", f[3])
	}
	secs, err := strconv.ParseFloat(f[10], 64)
	if err != nil || secs < 0 {
		return Result{}, fmt.Errorf("seconds %q", f[10])
	}
	kind := Kind(f[7])
	if !slices.Contains([]Kind{Pass, Fail, Timeout, Leftover, NotRun}, kind) {
		return Result{}, fmt.Errorf("verdict %q", f[7])
	}
	if f[8] != "" && f[8] != "yes" {
		return Result{}, fmt.Errorf("at_limit %q, want yes or nothing", f[8])
	}
	t := Test{Dir: f[1], Name: f[2], NP: np, Args: strings.Fields(f[4]), Env: strings.Fields(f[5]), XFail: f[9]}
	return Result{Build: f[0], Test: t, Runner: Runner(f[6]),
		Verdict: Verdict{Kind: kind, AtLimit: f[8] == "yes", Reason: f[11]},
		Elapsed: time.Duration(math.Round(secs*1e3)) * time.Millisecond, Try: try}, nil
}

// Key names one run of a suite: build, test, runner and try (1 the
// first).
func Key(build string, t Test, r Runner, try int) string {
	return build + "\x00" + t.ID() + "\x00" + string(r) + "\x00" + strconv.Itoa(max(try, 1))
}

// RanIntoLimit reports whether a run lasted until its time limit (ended
// by the launcher at the limit, or killed by the harness).
func (v Verdict) RanIntoLimit() bool { return v.AtLimit || v.Kind == Timeout }

// Totals sums the elapsed time per build and runner.
func Totals(results []Result) map[string]map[Runner]time.Duration {
	out := map[string]map[Runner]time.Duration{}
	for _, r := range results {
		if out[r.Build] == nil {
			out[r.Build] = map[Runner]time.Duration{}
		}
		out[r.Build][r.Runner] += r.Elapsed
	}
	return out
}

// WriteTotals writes the time per build and runner.
func WriteTotals(w io.Writer, builds []string, results []Result) {
	t := Totals(results)
	for _, b := range builds {
		if t[b] == nil {
			continue
		}
		var parts []string
		for _, rn := range Runners {
			if d, ok := t[b][rn]; ok {
				parts = append(parts, fmt.Sprintf("%s %.0fs", rn, d.Seconds()))
			}
		}
		fmt.Fprintf(w, "%s: time %s\n", b, strings.Join(parts, ", "))
	}
}

// SortedBuilds returns the builds of results in first-seen order.
func SortedBuilds(results []Result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.Build) {
			out = append(out, r.Build)
		}
	}
	return out
}

func atLimit(v Verdict) string {
	if v.AtLimit {
		return "yes"
	}
	return ""
}
