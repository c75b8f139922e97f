package pmi

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// Limits of MPICH's PMI-1 client (simple_pmiutil.h, v4.0.2).
const (
	// MaxLine is PMIU_MAXLINE: the client's line buffer, newline and NUL
	// included. A longer request is never sent by the client.
	MaxLine = 1024
	// MaxReply is the longest response line, newline included, that the
	// client reads in one piece; the rest of a longer one would be taken
	// as the next response and desynchronise the session.
	MaxReply = MaxLine - 1
	// MaxTokens is the size of the client's key=value table, which has no
	// bounds check.
	MaxTokens = 64
	// MaxValue is the longest value a client can take from a get: with the
	// maxes we advertise, MPICH sizes its buffer to vallen_max =
	// 1024-256-64-30 = 674 bytes, NUL included.
	MaxValue = 673
	// maxRequest bounds a request line we accept (MPICH never sends more
	// than MaxLine); longer input ends the session.
	maxRequest = 4 * MaxLine
)

// The maxes advertised in reply to get_maxes (Hydra's numbers; MPICH
// derives its effective value limit, MaxValue, from them).
const (
	KVSNameMax = 256
	KeyLenMax  = 64
	ValLenMax  = 1024
)

// Pair is one key=value token.
type Pair struct {
	Key, Value string
}

// Line is one PMI-1 request or response: its command and its other pairs
// in wire order.
type Line struct {
	Cmd   string // value of cmd= (or mcmd=)
	Multi bool   // the line was mcmd=..., the start of a multi-line command
	Pairs []Pair // the other tokens, in order
}

// Get returns the value of the first pair named key.
func (l *Line) Get(key string) (string, bool) {
	for _, p := range l.Pairs {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// Int returns the value of key as a decimal integer.
func (l *Line) Int(key string) (int, bool) {
	v, ok := l.Get(key)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// ParseLine parses one PMI-1 line (without its newline; a trailing "\r"
// is tolerated). Tokens are separated by runs of spaces and split at their
// first '=', so values may contain '=' but not spaces. The first token
// must be cmd= or mcmd= (requests of Hydra-style servers require it).
// Only the first occurrence of a key counts for Get.
func ParseLine(b []byte) (Line, error) {
	b = bytes.TrimSuffix(b, []byte("\r"))
	var l Line
	first := true
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] == ' ' {
			i++
		}
		b = b[i:]
		if len(b) == 0 {
			break
		}
		end := bytes.IndexByte(b, ' ')
		if end < 0 {
			end = len(b)
		}
		tok := b[:end]
		b = b[end:]
		k, v, ok := bytes.Cut(tok, []byte("="))
		if !ok || len(k) == 0 {
			return Line{}, wire.Errorf(wire.ErrMalformed, "pmi: token %q is not key=value", clip(tok))
		}
		if first {
			first = false
			switch string(k) {
			case "cmd":
			case "mcmd":
				l.Multi = true
			default:
				return Line{}, wire.Errorf(wire.ErrMalformed, "pmi: line starts with %q, not cmd= or mcmd=", clip(k))
			}
			if len(v) == 0 {
				return Line{}, wire.Errorf(wire.ErrMalformed, "pmi: empty command name")
			}
			l.Cmd = string(v)
			continue
		}
		l.Pairs = append(l.Pairs, Pair{string(k), string(v)})
	}
	if first {
		return Line{}, wire.Errorf(wire.ErrMalformed, "pmi: empty line")
	}
	return l, nil
}

// AppendLine appends the response `cmd=<cmd> k1=v1 ...\n` to dst; kv
// holds keys and values alternately. It fails, appending nothing, when a
// token cannot be represented (a space, newline, carriage return or NUL
// in a value; a key that is empty or holds '='), when there are more than MaxTokens tokens,
// or when the line would exceed MaxReply: a line the client would
// misread is never produced.
func AppendLine(dst []byte, cmd string, kv ...string) ([]byte, error) {
	if len(kv)%2 != 0 {
		return dst, wire.Errorf(wire.ErrInternal, "pmi: odd key/value list for %s", cmd)
	}
	if 1+len(kv)/2 > MaxTokens {
		return dst, wire.Errorf(wire.ErrTooLarge, "pmi: %d tokens in a %s line; the client takes %d", 1+len(kv)/2, cmd, MaxTokens)
	}
	if err := checkToken("cmd", cmd); err != nil || cmd == "" {
		return dst, wire.Errorf(wire.ErrInternal, "pmi: bad command name %q", clip([]byte(cmd)))
	}
	n := len(dst)
	dst = append(dst, "cmd="...)
	dst = append(dst, cmd...)
	for i := 0; i < len(kv); i += 2 {
		if err := checkToken(kv[i], kv[i+1]); err != nil {
			return dst[:n], err
		}
		dst = append(dst, ' ')
		dst = append(dst, kv[i]...)
		dst = append(dst, '=')
		dst = append(dst, kv[i+1]...)
	}
	dst = append(dst, '\n')
	if len(dst)-n > MaxReply {
		return dst[:n], wire.Errorf(wire.ErrTooLarge, "pmi: %s reply of %d bytes; the client reads %d", cmd, len(dst)-n, MaxReply)
	}
	return dst, nil
}

// checkToken says whether key=value can be one token of a PMI-1 line. A
// '\r' is refused like a newline: readers (ParseLine among them) drop a
// "\r" before the newline, so a token ending in one would not read back.
func checkToken(key, value string) error {
	if key == "" || strings.ContainsAny(key, "= \r\n\x00") {
		return wire.Errorf(wire.ErrInvalid, "pmi: key %q cannot be sent", clip([]byte(key)))
	}
	if strings.ContainsAny(value, " \r\n\x00") {
		return wire.Errorf(wire.ErrInvalid, "pmi: the value of %s holds a space, carriage return, newline or NUL and cannot be sent", clip([]byte(key)))
	}
	return nil
}

// Token makes s safe as a PMI-1 value: spaces, newlines and NULs become
// '_' (Hydra words its messages the same way: key_x_not_found).
func Token(s string) string {
	if !strings.ContainsAny(s, " \n\r\t\x00") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\r', '\t', 0:
			return '_'
		}
		return r
	}, s)
}

// clip shortens untrusted input quoted in an error message.
func clip(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
