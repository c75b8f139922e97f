// Command dynrun: see Main.
package main

import (
	"context"
	"io"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/pmix"
)

func main() {
	cliutil.RunMain(func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		code := Main(ctx, args, stdout, stderr)
		// The process's PMIx server, if a daemon here started one: it
		// lives as long as the process (lib/pmix).
		_ = pmix.Finalize()
		return code
	})
}
