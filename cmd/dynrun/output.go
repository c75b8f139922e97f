package main

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// outputOpts are the output flags of the launch form.
type outputOpts struct {
	Tag       bool   // --tag-output
	Timestamp bool   // --timestamp-output
	Dir       string // --output-dir (written by the daemons, not by dynrun)
}

// sink writes the forwarded output lines of a job to dynrun's stdout and
// stderr, each line in one write.
//
// The tag mirrors Open MPI's --tag-output, `[<job number>,<rank>]<stdout>:`
// (or <stderr>:), and the timestamp is the time the daemon read the line, in
// UTC with microseconds, followed by one space; when both are on the
// timestamp comes first.
type sink struct {
	opts           outputOpts
	stdout, stderr io.Writer

	mu  sync.Mutex
	buf []byte
}

func newSink(opts outputOpts, stdout, stderr io.Writer) *sink {
	return &sink{opts: opts, stdout: stdout, stderr: stderr}
}

// jobTag is the job part of a tag: the job number, which ends the
// namespace (<dvm id>.<number>), or the whole namespace if it has another
// shape.
func jobTag(namespace string) string {
	if i := strings.LastIndexByte(namespace, '.'); i >= 0 {
		if _, err := strconv.ParseUint(namespace[i+1:], 10, 32); err == nil {
			return namespace[i+1:]
		}
	}
	return namespace
}

// format appends the prefixed line (with newline) to dst.
func (s *sink) format(dst []byte, l *wire.OutputLine) []byte {
	if s.opts.Timestamp {
		dst = time.Unix(0, l.Time).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000000Z ")
	}
	if s.opts.Tag {
		dst = append(dst, '[')
		dst = append(dst, jobTag(l.Job)...)
		dst = append(dst, ',')
		dst = strconv.AppendUint(dst, uint64(l.Rank), 10)
		if l.Stream == wire.StreamStderr {
			dst = append(dst, "]<stderr>:"...)
		} else {
			dst = append(dst, "]<stdout>:"...)
		}
	}
	dst = append(dst, l.Line...)
	return append(dst, '\n')
}

// write handles one line.
func (s *sink) write(l wire.OutputLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.format(s.buf[:0], &l)
	w := s.stdout
	if l.Stream == wire.StreamStderr {
		w = s.stderr
	}
	_, _ = w.Write(s.buf) // a closed terminal must not stop the job
}
