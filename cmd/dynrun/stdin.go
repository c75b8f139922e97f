package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/dynrt/dynrt/lib/tool"
)

// stdinChunk is the most dynrun reads from its stdin per job.stdin message.
const stdinChunk = 32 << 10

// forwardStdin copies r to the stdin of rank 0 of job (--stdin 0) until
// r ends, then closes that stdin. Each piece waits for the master's reply,
// so a rank that reads slowly slows the copy instead of filling memory.
// It stops quietly once rank 0 no longer takes input (it exited) or ctx
// ends; a Read that never returns keeps the goroutine, which dies with
// dynrun.
func forwardStdin(ctx context.Context, cl *tool.Client, job string, r io.Reader, log *slog.Logger) {
	if r == nil {
		r = eofReader{}
	}
	buf := make([]byte, stdinChunk)
	for {
		n, rerr := r.Read(buf)
		if ctx.Err() != nil {
			return
		}
		eof := rerr != nil
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			log.Warn("dynrun: reading stdin; closing the job's stdin", "err", rerr)
		}
		if n > 0 || eof {
			if err := cl.Stdin(ctx, job, 0, buf[:n], eof); err != nil {
				log.Debug("dynrun: rank 0 takes no more stdin", "job", job, "err", err)
				return
			}
		}
		if eof {
			return
		}
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
