package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestReportGolden(t *testing.T) {
	var out bytes.Buffer
	if err := report([]string{filepath.Join("testdata", "report.in")}, &out); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		xs   []int64
		q    float64
		want int64
	}{
		{nil, 0.5, 0},
		{[]int64{3}, 0.5, 3},
		{[]int64{4, 1, 3, 2}, 0.5, 2}, // mean of 2 and 3, truncated
		{[]int64{5, 1, 3}, 0.5, 3},
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.1, 2},
		{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
	} {
		if got := quantile(tc.xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %d, want %d", tc.xs, tc.q, got, tc.want)
		}
	}
}

func TestParseKs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"1,4,8", "[1 4 8]", false},
		{" 2 , 3", "[2 3]", false},
		{"0", "", true},
		{"1,,2", "", true},
		{"x", "", true},
	} {
		ks, err := parseKs(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseKs(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && fmt.Sprint(ks) != tc.want {
			t.Errorf("parseKs(%q) = %v, want %s", tc.in, ks, tc.want)
		}
	}
}

func TestParseBadLine(t *testing.T) {
	if _, err := parse(strings.NewReader("ROUND {not json}\n")); err == nil {
		t.Error("a ROUND line with broken JSON parsed without an error")
	}
}

// TestMainUsage checks the exit codes of wrong invocations (no runtime
// needed: they fail before session.Init).
func TestMainUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"spawnbench", "-k", "0"}, 2},
		{[]string{"spawnbench", "-rounds", "-1"}, 2},
		{[]string{"spawnbench", "-nosuchflag"}, 2},
		{[]string{"spawnbench", "report"}, 1},
		{[]string{"spawnbench", "report", "testdata/no-such-file"}, 1},
		{[]string{"spawnbench", "report", "testdata/report.in"}, 0},
	} {
		var out, errb bytes.Buffer
		if got := Main(t.Context(), tc.args, &out, &errb); got != tc.code {
			t.Errorf("Main(%q) = %d, want %d; stderr %s", tc.args, got, tc.code, errb.String())
		}
	}
}
