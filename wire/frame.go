package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
)

// A frame is a 4-byte big-endian body length followed by that many bytes of
// body (one msgpack envelope). Nothing else is ever on the stream.

// DefaultMaxFrame is the body size limit used when none is configured.
const DefaultMaxFrame = 16 << 20

// HeaderSize is the size of the length prefix.
const HeaderSize = 4

// headKeep is how much of an oversize body is kept (the rest is discarded) so
// that the envelope's id and kind can still be recovered for an error reply.
const headKeep = 256

// FrameTooLargeError reports a frame whose header announced more than the
// reader's limit. The body has been consumed from the stream (and dropped),
// so the reader stays usable. It matches ErrTooLarge with errors.Is.
type FrameTooLargeError struct {
	Size  uint32 // length from the header
	Limit int    // the reader's limit
	Head  []byte // the first bytes of the body (at most 256)
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("wire: frame of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// Is makes the error match ErrTooLarge.
func (e *FrameTooLargeError) Is(target error) bool { return target == ErrTooLarge }

// normMax turns a configured limit into an effective one.
func normMax(max int) int {
	if max <= 0 {
		return DefaultMaxFrame
	}
	if uint64(max) > math.MaxUint32 {
		return math.MaxUint32
	}
	return max
}

// Reader reads frames from any io.Reader. It does no buffering of its own:
// wrap the source in a bufio.Reader when it is a socket. Not safe for
// concurrent use.
type Reader struct {
	r   io.Reader
	max int
	hdr [HeaderSize]byte
}

// NewReader returns a frame reader with the given body limit (<= 0 means
// DefaultMaxFrame).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: r, max: normMax(max)}
}

// SetMax changes the body limit (<= 0 means DefaultMaxFrame).
func (r *Reader) SetMax(max int) { r.max = normMax(max) }

// Max returns the body limit.
func (r *Reader) Max() int { return r.max }

// ReadFrame reads the next frame into a newly allocated slice.
//
// Errors: io.EOF when the stream ends cleanly between frames;
// io.ErrUnexpectedEOF (or the source's error) when it ends inside one — the
// framing is then lost and the stream must be abandoned; a
// *FrameTooLargeError (matching ErrTooLarge) for an oversize frame, after
// which reading can continue with the next frame. The limit is checked
// before anything is allocated for the body.
func (r *Reader) ReadFrame() ([]byte, error) {
	return r.ReadFrameInto(nil)
}

// ReadFrameInto is ReadFrame reusing buf's storage when it is large enough.
func (r *Reader) ReadFrameInto(buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, err // io.EOF only when no header byte arrived
	}
	n := binary.BigEndian.Uint32(r.hdr[:])
	if uint64(n) > uint64(r.max) {
		return nil, r.skip(n)
	}
	if cap(buf) >= int(n) {
		buf = buf[:n]
	} else {
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(r.r, buf); err != nil {
		return nil, unexpected(err)
	}
	return buf, nil
}

// skip consumes an oversize body, keeping only its head.
func (r *Reader) skip(n uint32) error {
	keep := min(int(n), headKeep)
	e := &FrameTooLargeError{Size: n, Limit: r.max, Head: make([]byte, keep)}
	if _, err := io.ReadFull(r.r, e.Head); err != nil {
		return unexpected(err)
	}
	rest := int64(n) - int64(keep)
	if rest > 0 {
		// io.Discard reads through a small pooled buffer: nothing of the
		// announced size is ever allocated.
		if got, err := io.CopyN(io.Discard, r.r, rest); err != nil {
			if got < rest && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return e
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Writer writes frames to any io.Writer. WriteFrame is safe for concurrent
// use: frames never interleave.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	max int
	hdr [HeaderSize]byte
}

// NewWriter returns a frame writer that refuses bodies over max (<= 0 means
// DefaultMaxFrame).
func NewWriter(w io.Writer, max int) *Writer {
	return &Writer{w: w, max: normMax(max)}
}

// WriteFrame writes one frame holding body. A body over the limit is refused
// with an error matching ErrTooLarge and nothing is written.
func (w *Writer) WriteFrame(body []byte) error {
	if len(body) > w.max {
		return Errorf(ErrTooLarge, "wire: frame of %d bytes exceeds the limit of %d bytes", len(body), w.max)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	binary.BigEndian.PutUint32(w.hdr[:], uint32(len(body)))
	// net.Buffers uses writev on sockets and plain sequential writes
	// elsewhere; either way the header and body go out under one lock.
	bufs := net.Buffers{w.hdr[:], body}
	_, err := bufs.WriteTo(w.w)
	return err
}

// AppendFrame appends a complete frame (header and body) to dst.
func AppendFrame(dst, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	return append(dst, body...)
}
