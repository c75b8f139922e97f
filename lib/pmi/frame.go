package pmi

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// PMI-2 framing: a header of HeaderLen characters holding the decimal
// payload length (padded with spaces on either side: Hydra right-aligns,
// the MPICH 4.0.x client left-aligns), then the payload, a sequence of
// key=value; pairs whose first key is cmd. A ';' inside a value is
// doubled.
const (
	HeaderLen = 6
	// MaxFrame bounds a payload (the client's own limit is 64 KiB; its
	// 4.0.x requests are 6 bytes longer than their content).
	MaxFrame = 64<<10 + HeaderLen
	// MaxKey2 and MaxValue2 are PMI2_MAX_KEYLEN and PMI2_MAX_VALLEN.
	MaxKey2   = 64
	MaxValue2 = 1024
)

// Command is one PMI-2 request or response.
type Command struct {
	Cmd   string // value of the leading cmd=
	Pairs []Pair // the other pairs in order (first occurrence wins in Get)
}

// Get returns the value of the first pair named key.
func (c *Command) Get(key string) (string, bool) {
	for _, p := range c.Pairs {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// Int returns the value of key as a decimal integer.
func (c *Command) Int(key string) (int, bool) {
	v, ok := c.Get(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// Bool returns the value of key as a PMI-2 boolean (TRUE or FALSE).
func (c *Command) Bool(key string) (val, ok bool) {
	switch v, _ := c.Get(key); v {
	case "TRUE":
		return true, true
	case "FALSE":
		return false, true
	}
	return false, false
}

// ReadFrame reads one frame and returns its payload (a fresh slice). EOF
// before the first header byte is io.EOF; anything else that is not a
// well-formed frame is an ErrMalformed error (or ErrTooLarge), after
// which the stream cannot be followed any more.
func ReadFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, wire.Errorf(wire.ErrMalformed, "pmi: connection closed inside a frame header")
		}
		return nil, err
	}
	n, err := parseHeader(hdr[:])
	if err != nil {
		return nil, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, wire.Errorf(wire.ErrMalformed, "pmi: frame of %d bytes cut short: %w", n, err)
	}
	return withoutJunk(hdr[:], p), nil
}

// withoutJunk drops the 6 garbage bytes the MPICH 4.0.x client (the one
// that left-aligns its header) sends after each request. ParseFrame alone
// cannot always tell them from data: junk that starts with ';' (a
// leftover of an earlier request) turns the last value's ';' into an
// escaped ";;", and spaconacc's second spawn got path ".;" instead of
// ".". A left-aligned frame whose content does not end with ';' 6 bytes
// early is left alone (it is not such a request).
func withoutJunk(hdr, p []byte) []byte {
	const junk = 6
	leftAligned := hdr[0] != ' ' && hdr[HeaderLen-1] == ' '
	if !leftAligned || len(p) < junk+1 || p[len(p)-junk-1] != ';' {
		return p
	}
	return p[:len(p)-junk]
}

// parseHeader reads the length the way the client's atoi does, but
// strictly: spaces, digits, spaces, nothing else.
func parseHeader(h []byte) (int, error) {
	s := strings.Trim(string(h), " ")
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || s == "" || s[0] == '+' || s[0] == '-' {
		return 0, wire.Errorf(wire.ErrMalformed, "pmi: frame header %q is not a length", clip(h))
	}
	if n > MaxFrame {
		return 0, wire.Errorf(wire.ErrTooLarge, "pmi: frame of %d bytes (at most %d)", n, MaxFrame)
	}
	return n, nil
}

// ParseFrame parses a payload. It stops at the first NUL and ignores a
// trailing piece that is not a complete key=value; pair: the MPICH 4.0.x
// client declares 6 bytes more than it means and fills them with stack
// garbage. Pairs without '=' are skipped for the same reason. The first
// pair must be cmd= with a non-empty value.
func ParseFrame(p []byte) (Command, error) {
	if i := indexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	var c Command
	first := true
	for len(p) > 0 {
		eq := indexByte(p, '=')
		semi := indexByte(p, ';')
		if semi >= 0 && (eq < 0 || semi < eq) {
			// A stray token without '=' (garbage): skip it.
			if first {
				return Command{}, wire.Errorf(wire.ErrMalformed, "pmi: frame does not start with cmd=")
			}
			p = p[semi+1:]
			continue
		}
		if eq < 0 {
			break // trailing garbage
		}
		key := string(p[:eq])
		val, rest, ok := scanValue(p[eq+1:])
		if !ok {
			break // an unterminated last pair: garbage
		}
		p = rest
		if first {
			if key != "cmd" || val == "" {
				return Command{}, wire.Errorf(wire.ErrMalformed, "pmi: frame starts with %q, not cmd=", clip([]byte(key)))
			}
			c.Cmd = val
			first = false
			continue
		}
		if key == "" {
			continue
		}
		c.Pairs = append(c.Pairs, Pair{key, val})
	}
	if first {
		return Command{}, wire.Errorf(wire.ErrMalformed, "pmi: frame holds no cmd=")
	}
	return c, nil
}

// scanValue reads a value up to its terminating single ';', undoing the
// ';;' escapes.
func scanValue(p []byte) (string, []byte, bool) {
	var sb strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != ';' {
			continue
		}
		if i+1 < len(p) && p[i+1] == ';' {
			sb.Write(p[:i+1])
			p = p[i+2:]
			i = -1
			continue
		}
		sb.Write(p[:i])
		return sb.String(), p[i+1:], true
	}
	return "", nil, false
}

func indexByte(p []byte, c byte) int {
	for i, b := range p {
		if b == c {
			return i
		}
	}
	return -1
}

// AppendFrame appends a frame `   len` + `cmd=<cmd>;k1=v1;...` to dst;
// kv holds keys and values alternately. Values have their ';' doubled.
// Keys must be non-empty without '=' or ';'.
func AppendFrame(dst []byte, cmd string, kv ...string) ([]byte, error) {
	if len(kv)%2 != 0 {
		return dst, wire.Errorf(wire.ErrInternal, "pmi: odd key/value list for %s", cmd)
	}
	n := len(dst)
	dst = append(dst, "      cmd="...)
	dst = appendEscaped(dst, cmd)
	dst = append(dst, ';')
	for i := 0; i < len(kv); i += 2 {
		if kv[i] == "" || strings.ContainsAny(kv[i], "=;\x00") {
			return dst[:n], wire.Errorf(wire.ErrInternal, "pmi: bad key %q", clip([]byte(kv[i])))
		}
		dst = append(dst, kv[i]...)
		dst = append(dst, '=')
		dst = appendEscaped(dst, kv[i+1])
		dst = append(dst, ';')
	}
	size := len(dst) - n - HeaderLen
	if size > MaxFrame-HeaderLen {
		return dst[:n], wire.Errorf(wire.ErrTooLarge, "pmi: %s reply of %d bytes", cmd, size)
	}
	h := strconv.Itoa(size)
	copy(dst[n+HeaderLen-len(h):n+HeaderLen], h) // right-aligned, like Hydra's %6u
	return dst, nil
}

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == ';' {
			dst = append(dst, ';')
		}
		dst = append(dst, s[i])
	}
	return dst
}
