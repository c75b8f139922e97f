package mpichsuite

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestParseTestlistGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/testlist/basic.txt")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := ParseTestlist(bytes.NewReader(data), "dir")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(ents, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testlist/basic.golden", append(got, '\n'))

	// The rules the golden file shows, stated where a wrong rule fails.
	byName := map[string]Test{}
	for _, e := range ents {
		if e.Directive == nil {
			byName[e.Test.Name] = e.Test
		}
	}
	if n := len(ents); n != 11 {
		t.Errorf("%d entries, want 11 (comments and blank lines skipped, one directive)", n)
	}
	if np := byName["simple"].NP; np != DefaultNP {
		t.Errorf("np of a line without one = %d, want %d", np, DefaultNP)
	}
	if _, ok := byName["indented"]; !ok {
		t.Error("a line with leading blanks and a trailing comment is lost")
	}
	if e := byName["envs"].Env; len(e) != 2 || e[1] != "A=b=c" {
		t.Errorf("env= values %q, want the text after the first '=' of each", e)
	}
	if a := byName["loose"].Args; len(a) != 1 || a[0] != "-x" {
		t.Errorf("a token without '=' must be ignored, args %q", a)
	}
	if ft := byName["ft"]; ft.TimeLimit != 10 || ft.ResultTest != ResultTestStatusNoErrors || ft.XFail != "ticket1" ||
		len(ft.MpiexecArgs) != 1 || ft.MpiexecArgs[0] != "-disable-auto-cleanup" {
		t.Errorf("ft line parsed as %+v", ft)
	}
	last := ents[len(ents)-1].Directive
	if last == nil || last.Dir != "../util" || last.Target != "libmtest.la" {
		t.Errorf("directive parsed as %+v", last)
	}
}

func TestParseTestlistErrors(t *testing.T) {
	data, err := os.ReadFile("testdata/testlist/errors.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for line := range strings.Lines(string(data)) {
		_, err := ParseTestlist(strings.NewReader(line), "dir")
		if err == nil {
			t.Errorf("line %q: no error", strings.TrimSpace(line))
			continue
		}
		out.WriteString(err.Error() + "\n")
	}
	golden(t, "testlist/errors.golden", []byte(out.String()))
}

func TestSubstitute(t *testing.T) {
	data, err := os.ReadFile("testdata/testlist/subst.in")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Substitute(string(data), ConfigureVars)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testlist/subst.golden", []byte(got))
	ents, err := ParseTestlist(strings.NewReader(got), "spawn")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Test.Name)
	}
	// namepub and mpix enabled (empty value), largetest commented out.
	if want := "namepub spawn1 mpixtest"; strings.Join(names, " ") != want {
		t.Errorf("tests %q, want %q", strings.Join(names, " "), want)
	}

	vars := map[string]string{"namepub_tests": "#"}
	_, err = Substitute(string(data), vars)
	if err == nil || !strings.Contains(err.Error(), "largetest, mpix") {
		t.Errorf("missing variables: err %v, want one naming largetest, mpix", err)
	}
}

// TestSubstituteMatchesConfigure checks ConfigureVars against what
// test/mpi's configure really produced, when a configured tree is there.
func TestSubstituteMatchesConfigure(t *testing.T) {
	cache := os.Getenv("DYNRT_MPICH_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "dynrt")
	}
	src := filepath.Join(cache, "src", "mpich-4.0.2", "test", "mpi")
	matches, _ := filepath.Glob(filepath.Join(cache, "tests-*", "config.status"))
	if len(matches) == 0 {
		t.Skipf("no configured MPICH test suite under %s (scripts/mpich-suite.sh makes one)", cache)
	}
	built := filepath.Dir(matches[0])
	for _, dir := range []string{"spawn", "coll", "pt2pt", "rma", "comm", "attr"} {
		in, err := os.ReadFile(filepath.Join(src, dir, "testlist.in"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(built, dir, "testlist"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Substitute(string(in), ConfigureVars)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if got != string(want) {
			t.Errorf("%s/testlist.in substituted with ConfigureVars differs from configure's %s", dir, filepath.Join(built, dir, "testlist"))
		}
	}
}
