package proc

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
)

// DefaultMaxLine is the longest line delivered in one piece; longer lines are
// delivered as consecutive pieces of this size.
const DefaultMaxLine = 64 << 10

const initialLineBuf = 4 << 10

// lineBufs recycles the initial read buffers: most processes print little
// or nothing, so without it every process would leave two buffers of
// garbage behind, and a launch of hundreds of processes a GC cycle.
var lineBufs = sync.Pool{New: func() any { return new([initialLineBuf]byte) }}

// splitLines reads r until EOF or error and calls emit for every line without
// its trailing newline. A line longer than max is emitted in pieces of max
// bytes (a newline right after a full piece only ends that line); a final
// line without a newline is emitted at EOF. The slice passed to emit is only
// valid during the call. The error is nil at EOF and when the reader was
// closed under us (os.ErrClosed), which is how the pipes are cut after
// Spec.WaitDelay.
func splitLines(r io.Reader, max int, emit func([]byte)) error {
	// Start small and grow up to max: most programs print short lines, and a
	// node may run hundreds of processes with two streams each.
	var buf []byte
	if max >= initialLineBuf {
		pooled := lineBufs.Get().(*[initialLineBuf]byte)
		defer lineBufs.Put(pooled) // emit never keeps the slice
		buf = pooled[:]
	} else {
		buf = make([]byte, max)
	}
	n := 0       // bytes held in buf[:n], none of them a newline
	cut := false // the last piece was cut at max bytes
	for {
		m, err := r.Read(buf[n:])
		if m > 0 {
			data := buf[:n+m]
			start, from := 0, n
			if cut && data[0] == '\n' { // n is 0 after a cut
				start, from = 1, 1
			}
			cut = false
			for {
				i := bytes.IndexByte(data[from:], '\n')
				if i < 0 {
					break
				}
				emit(data[start : from+i])
				start = from + i + 1
				from = start
			}
			n = copy(buf, data[start:])
			if n == len(buf) {
				if len(buf) < max {
					buf = append(buf, make([]byte, min(len(buf), max-len(buf)))...)
				} else {
					emit(buf)
					n, cut = 0, true
				}
			}
		}
		if err != nil {
			if n > 0 {
				emit(buf[:n])
			}
			if err == io.EOF || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
	}
}
