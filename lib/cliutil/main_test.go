package cliutil

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestRunMain checks that main gets the arguments and streams, that its
// context ends at SIGTERM and SIGINT (which then do not kill the test
// process), and that its code is returned.
func TestRunMain(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runMain(func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
				fmt.Fprint(stdout, args)
				fmt.Fprint(stderr, "e")
				if err := syscall.Kill(os.Getpid(), sig); err != nil {
					t.Error(err)
				}
				select {
				case <-ctx.Done():
					return 7
				case <-time.After(10 * time.Second):
					return 1
				}
			}, []string{"prog", "-x"}, &out, &errb)
			if code != 7 || out.String() != "[prog -x]" || errb.String() != "e" {
				t.Errorf("code %d, stdout %q, stderr %q; want 7, [prog -x], e", code, out.String(), errb.String())
			}
		})
	}
}
