package wire

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// The package's msgpack settings, applied everywhere a body is encoded:
// compact integers (the smallest form that holds the value) and sorted map
// keys, so that equal values always produce equal bytes (golden files depend
// on it). Struct fields are encoded in declaration order as maps keyed by
// their msgpack tag.

// buffer is an append-only byte sink that satisfies the msgpack encoder's
// writer interface directly (a plain io.Writer would be wrapped in an adapter
// that allocates on every WriteByte).
type buffer struct{ b []byte }

func (w *buffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *buffer) WriteByte(c byte) error      { w.b = append(w.b, c); return nil }

// encState is a pooled encoder bound to its own buffer.
type encState struct {
	buf buffer
	enc *msgpack.Encoder
}

// Buffers that grew past this are dropped instead of pooled, so one huge
// message does not pin its memory for the life of the process.
const maxPooledBuf = 1 << 20

var encPool = sync.Pool{New: func() any {
	s := &encState{}
	s.enc = msgpack.NewEncoder(&s.buf)
	s.enc.SetSortMapKeys(true)
	s.enc.UseCompactInts(true)
	return s
}}

func getEnc() *encState {
	s := encPool.Get().(*encState)
	s.buf.b = s.buf.b[:0]
	return s
}

func putEnc(s *encState) {
	if cap(s.buf.b) > maxPooledBuf {
		s.buf.b = nil
	}
	encPool.Put(s)
}

// Marshal encodes v with the package settings (compact ints, sorted map
// keys). The result is freshly allocated.
func Marshal(v any) ([]byte, error) {
	s := getEnc()
	defer putEnc(s)
	if err := s.enc.Encode(v); err != nil {
		return nil, Errorf(ErrInvalid, "wire: encode %T: %w", v, err)
	}
	return bytes.Clone(s.buf.b), nil
}

// AppendMarshal appends the encoding of v to dst.
func AppendMarshal(dst []byte, v any) ([]byte, error) {
	s := getEnc()
	defer putEnc(s)
	if err := s.enc.Encode(v); err != nil {
		return dst, Errorf(ErrInvalid, "wire: encode %T: %w", v, err)
	}
	return append(dst, s.buf.b...), nil
}

// sliceReader is the decoder's source in Unmarshal. Being a ByteScanner it
// keeps the decoder from adding its own buffering, and it exposes the bytes
// so that hot custom decoders (RankRanges) can parse them in place.
type sliceReader struct {
	b   []byte
	off int
}

func (r *sliceReader) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (r *sliceReader) ReadByte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *sliceReader) UnreadByte() error {
	if r.off == 0 {
		return errors.New("wire: unread at start of input")
	}
	r.off--
	return nil
}

// rest returns the unread bytes; advance consumes n of them.
func (r *sliceReader) rest() []byte  { return r.b[r.off:] }
func (r *sliceReader) advance(n int) { r.off += n }

type decState struct {
	r   sliceReader
	dec *msgpack.Decoder
}

var decPool = sync.Pool{New: func() any {
	s := &decState{}
	s.dec = msgpack.NewDecoder(&s.r)
	return s
}}

// Unmarshal decodes one msgpack value from b into v. b must hold exactly one
// well-formed value; it is checked structurally first (lengths, nesting) so
// that hostile input cannot trigger huge allocations inside the decoder.
// Unknown map keys are ignored. Errors match ErrMalformed.
func Unmarshal(b []byte, v any) error {
	if err := unmarshal(b, v); err != nil {
		return Errorf(ErrMalformed, "wire: decode %T: %w", v, err)
	}
	return nil
}

// unmarshal is Unmarshal with the bare error, for callers that add their
// own context.
func unmarshal(b []byte, v any) error {
	if err := checkOne(b); err != nil {
		return err
	}
	s := decPool.Get().(*decState)
	s.r = sliceReader{b: b}
	err := s.dec.Decode(v)
	s.r = sliceReader{}
	if err != nil {
		// A decoder that failed half-way may hold partial state (a raw
		// recording in progress); let it go rather than pool it.
		return err
	}
	decPool.Put(s)
	return nil
}
