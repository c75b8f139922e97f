package main

import (
	"os/exec"
	"strings"
	"testing"
)

// runBinStdin runs the built binary with stdin and returns its exit
// status and output.
func runBinStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	return runCmd(t, cmd)
}

func TestStdinForwarding(t *testing.T) {
	dynDir(t)
	big := strings.Repeat("0123456789abcdef", 5000) + "\n" // several 32 KiB pieces
	for _, tc := range []struct {
		name, in string
		args     []string
		want     string
	}{
		// Only rank 0 reads dynrun's stdin; rank 1 reads /dev/null.
		{"rank0", "a\nb\n", []string{"-n", "2", "--slots", "2", "--stdin", "0", "cat"}, "a\nb\n"},
		// The EOF that ends the input reaches cat, which then exits.
		{"empty", "", []string{"-n", "1", "--slots", "1", "--stdin", "0", "cat"}, ""},
		{"large", big, []string{"-n", "1", "--slots", "1", "--stdin", "0", "wc", "-c"}, "80001\n"},
		// The default: processes read /dev/null even with input waiting.
		{"none", "a\nb\n", []string{"-n", "2", "--slots", "2", "cat"}, ""},
		{"none explicit", "a\n", []string{"-n", "1", "--slots", "1", "--stdin", "none", "cat"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runBinStdin(t, tc.in, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if out != tc.want {
				t.Errorf("stdout %q, want %q", out, tc.want)
			}
		})
	}
}

// A rank 0 that exits without reading its stdin does not hold dynrun.
func TestStdinUnread(t *testing.T) {
	dynDir(t)
	code, out, errOut := runBinStdin(t, strings.Repeat("x", 1<<20), "-n", "1", "--slots", "1", "--stdin", "0", "true")
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
