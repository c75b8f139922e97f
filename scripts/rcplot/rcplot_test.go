package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMainWritesFigures(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"rcplot", "-o", dir, "-tables", filepath.Join("testdata", "small.jsonl")}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, tc := range []struct {
		file string
		sig  string
	}{
		{"small-iterations.png", "\x89PNG\r\n\x1a\n"},
		{"small-iterations.svg", "<?xml"},
		{"phases-add.png", "\x89PNG\r\n\x1a\n"},
		{"phases-add.svg", "<?xml"},
		{"phases-sub.png", "\x89PNG\r\n\x1a\n"},
		{"phases-sub.svg", "<?xml"},
	} {
		path := filepath.Join(dir, tc.file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if len(b) < 1000 || !strings.HasPrefix(string(b), tc.sig) {
			t.Errorf("%s: %d bytes starting %q, want more than 1000 starting %q", tc.file, len(b), b[:min(len(b), 8)], tc.sig)
		}
		if strings.HasSuffix(tc.file, ".svg") && !strings.Contains(string(b), "<svg") {
			t.Errorf("%s has no <svg element", tc.file)
		}
		if !strings.Contains(out.String(), "wrote "+path) {
			t.Errorf("output does not name %s:\n%s", path, out.String())
		}
	}
	for _, want := range []string{"Table 8.2 shape", "Table 8.3 shape", "Figure 8.2 shape", "Figure 8.3 shape"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, out.String())
		}
	}
}

func TestMainErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"kind\":\"iter\",\"iter\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noIters := filepath.Join(dir, "none.jsonl")
	if err := os.WriteFile(noIters, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"no files", []string{"rcplot"}, 2},
		{"bad flag", []string{"rcplot", "-nope", "x"}, 2},
		{"missing file", []string{"rcplot", "-o", dir, filepath.Join(dir, "missing.jsonl")}, 1},
		{"malformed line", []string{"rcplot", "-o", dir, bad}, 1},
		{"nothing to draw", []string{"rcplot", "-o", dir, noIters}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(context.Background(), tc.args, &out, &errb); code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("failed runs left files: %v", ents)
	}
}
