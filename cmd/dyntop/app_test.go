package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/lib/dvmdir"
)

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := run("--help")
	if code != 0 || !strings.Contains(out, "dyntop") || !strings.Contains(out, "--readonly") || !strings.Contains(out, "--once") {
		t.Fatalf("--help: exit %d, output %q", code, out)
	}
	code, out, _ = run("--version")
	if code != 0 || !strings.HasPrefix(out, "dyntop version ") {
		t.Fatalf("--version: exit %d, output %q", code, out)
	}
}

func TestUsageAndNoDVM(t *testing.T) {
	t.Setenv(dvmdir.EnvDir, filepath.Join(t.TempDir(), "none"))
	t.Setenv(dvmdir.EnvDVM, "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"--once", "--width", "-3"}, 2, "--width"},
		{[]string{"--once"}, 1, "no running DVM"},
		{[]string{}, 1, "no running DVM"}, // stdout is not a terminal: one snapshot
	} {
		code, out, errOut := run(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q), stdout %q", c.args, code, c.code, errOut, c.want, out)
		}
	}
}

// --once against a live DVM: one plain screen of the asked size.
func TestOnce(t *testing.T) {
	d := startDVM(t, 2, 3)
	rep := d.launch("lu", 4, "/bin/sleep", "60")
	for _, size := range []struct {
		args []string
		w, h int
	}{
		{[]string{"--once"}, 80, 24}, // not a terminal: the default size
		{[]string{"--once", "--width", "120", "--height", "40"}, 120, 40},
		{[]string{}, 80, 24}, // not a terminal: --once implied
	} {
		code, out, errOut := run(size.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %s", size.args, code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != size.h {
			t.Errorf("%v: %d lines, want %d", size.args, len(lines), size.h)
		}
		for _, l := range lines {
			if len([]rune(l)) > size.w || strings.HasSuffix(l, " ") || strings.Contains(l, "\x1b") {
				t.Errorf("%v: bad line %q", size.args, l)
			}
		}
		for _, want := range []string{"DVM " + d.m.Info().ID + " (toptest)", "slots", "node0 │A0 A1 A2 │ 3/3", "node1 │A3 ·  ·  │ 1/3",
			"lu", "running", "process sets of lu", "mpi://WORLD", "pset.def"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: snapshot lacks %q:\n%s", size.args, want, out)
			}
		}
	}
	_ = rep
}
