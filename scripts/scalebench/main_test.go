package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/internal/simdvm"
)

// TestMain lets this test binary be the nodes host that Main starts (it
// re-executes itself, as the scalebench binary does).
func TestMain(m *testing.M) {
	if simdvm.IsHost() {
		os.Exit(hostMain(context.Background(), nil, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestMainWritesResults runs the benchmark on two tiny DVMs: a row per
// size in the table and in scale.tsv, the exponents, and both plots.
func TestMainWritesResults(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts two simulated DVMs")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"scalebench", "-nodes", "2,4", "-slots", "2", "-k", "2", "-fence-slots", "1", "-radix", "2", "-o", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	tsv, err := os.ReadFile(filepath.Join(dir, "scale.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(tsv)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "2\t4\t") || !strings.HasPrefix(lines[2], "4\t8\t") {
		t.Errorf("scale.tsv: want a header and rows for 2 and 4 nodes (of 2 slots), got\n%s", tsv)
	}
	head := strings.Split(lines[0], "\t")
	for _, l := range lines[1:] {
		cols := strings.Split(l, "\t")
		if len(cols) != len(head) {
			t.Errorf("row %q does not match the header", l)
			continue
		}
		// The floors and fences are measured, never zero: a round takes time.
		for i, h := range head {
			if h != "ping_round_ms" && h != "tree_ping_round_ms" && h != "fence_ms" && h != "modex_ms" {
				continue
			}
			if v, err := strconv.ParseFloat(cols[i], 64); err != nil || v <= 0 {
				t.Errorf("row %q: %s %q, want a round's milliseconds", l, h, cols[i])
			}
		}
		if !slices.Contains(head, "tree_ping_round_ms") {
			t.Errorf("no tree_ping_round_ms column in %q", lines[0])
		}
	}
	if !strings.Contains(out.String(), "growth exponents") || !strings.Contains(out.String(), "ADD k") {
		t.Errorf("no exponents in the output:\n%s", out.String())
	}
	for _, f := range []string{"scale.svg", "scale.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestMainBadSizes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"scalebench", "-nodes", "16,x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"x" is not a size`) {
		t.Errorf("-nodes 16,x: exit %d, %q; want 2 and a message naming x", code, errb.String())
	}
}
