package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"dynrun"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpAndVersion(t *testing.T) {
	code, out, _ := run("--help")
	if code != 0 || !strings.Contains(out, "dynrun") {
		t.Fatalf("--help: exit %d, output %q", code, out)
	}
	code, out, _ = run("--version")
	if code != 0 || !strings.HasPrefix(out, "dynrun version ") {
		t.Fatalf("--version: exit %d, output %q", code, out)
	}
}

// Commands that arrive with later issues must say so and fail, not fake output.
func TestComingCommandsSaySo(t *testing.T) {
	for _, args := range [][]string{{"dvm", "start"}, {"dvm", "stop"}, {"dvm", "status"}, {"dvm", "list"}, {"true"}} {
		code, out, errOut := run(args...)
		if code != 1 || out != "" || !strings.Contains(errOut, "not implemented yet") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	if code, _, errOut := run("--no-such-flag"); code != 2 || !strings.Contains(errOut, "no-such-flag") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
