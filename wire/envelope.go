package wire

import (
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
)

// Envelope is the one message shape on the wire: a msgpack map (not an
// array, so fields can be added) with these keys. Unknown keys are skipped.
//
// Id parity decides who owns an id, as with HTTP/2 streams: the side that
// dialed numbers its requests with odd ids, the side that accepted with even
// ids, and id 0 marks a pushed event that gets no reply. A reply carries the
// id and kind of its request.
type Envelope struct {
	V    uint32             `msgpack:"v"`              // protocol version: the one negotiated in the handshake
	ID   uint64             `msgpack:"id"`             // request id; 0 for events
	Kind string             `msgpack:"kind"`           // message kind, e.g. "pset.op"
	Body msgpack.RawMessage `msgpack:"body,omitempty"` // request, reply or event payload
	Err  *Error             `msgpack:"err,omitempty"`  // set on error replies instead of body
}

// AppendEnvelope appends the encoding of e to dst. The result equals what
// Marshal produces for the same value; it is written by hand because every
// frame goes through it.
func AppendEnvelope(dst []byte, e *Envelope) []byte {
	n := 3
	if len(e.Body) > 0 {
		n++
	}
	if e.Err != nil {
		n++
	}
	dst = appendMapLen(dst, n)
	dst = appendEnvelopeHead(dst, e.V, e.ID, e.Kind)
	if len(e.Body) > 0 {
		dst = appendStr(dst, "body")
		dst = append(dst, e.Body...)
	}
	if e.Err != nil {
		dst = appendErr(dst, e.Err)
	}
	return dst
}

func appendEnvelopeHead(dst []byte, v uint32, id uint64, kind string) []byte {
	dst = appendStr(dst, "v")
	dst = appendUint(dst, uint64(v))
	dst = appendStr(dst, "id")
	dst = appendUint(dst, id)
	dst = appendStr(dst, "kind")
	return appendStr(dst, kind)
}

func appendErr(dst []byte, e *Error) []byte {
	dst = appendStr(dst, "err")
	dst = appendMapLen(dst, 2)
	dst = appendStr(dst, "code")
	dst = appendStr(dst, string(e.Code))
	dst = appendStr(dst, "msg")
	return appendStr(dst, e.Msg)
}

// DecodeEnvelope decodes one envelope that must fill b exactly. Body aliases
// b. The whole frame is checked structurally on the way (lengths, nesting),
// so Body is known to hold one well-formed value.
//
// On error, the returned envelope still holds whatever fields were read
// before the problem (typically V, ID and Kind, which senders write first),
// so that the caller can address an error reply. The error matches
// ErrMalformed.
func DecodeEnvelope(b []byte) (Envelope, error) {
	e, _, err := decodeEnvelope(b)
	return e, err
}

// decodeEnvelope is DecodeEnvelope that also says whether the frame's id
// is known: read from its id key, or absent from a frame that decoded
// whole (an event). A bad frame whose id is not known can be neither
// answered at its id nor taken for an event (see Conn.onBadFrame).
func decodeEnvelope(b []byte) (e Envelope, idKnown bool, err error) {
	err = e.decode(b, &idKnown)
	if err != nil {
		err = Errorf(ErrMalformed, "wire: malformed envelope: %w", err)
	} else {
		idKnown = true
	}
	return e, idKnown, err
}

func (e *Envelope) decode(b []byte, idRead *bool) error {
	n, off, err := readMapLen(b, 0)
	if err != nil {
		return err
	}
	if n > len(b)-off {
		return errBadLength
	}
	var key []byte
	for i := 0; i < n; i++ {
		key, off, err = readStr(b, off)
		if err != nil {
			return fmt.Errorf("envelope key: %w", err)
		}
		switch string(key) { // no allocation: the compiler special-cases this
		case "v":
			var v uint64
			if v, off, err = readUint(b, off); err != nil {
				return fmt.Errorf("field v: %w", err)
			}
			if v > math.MaxUint32 {
				return fmt.Errorf("field v: version %d does not fit an unsigned 32-bit number", v)
			}
			e.V = uint32(v)
		case "id":
			if e.ID, off, err = readUint(b, off); err != nil {
				return fmt.Errorf("field id: %w", err)
			}
			*idRead = true
		case "kind":
			var k []byte
			if k, off, err = readStr(b, off); err != nil {
				return fmt.Errorf("field kind: %w", err)
			}
			e.Kind = string(k)
		case "body":
			end, err := checkNested(b, off, maxDepth-1) // inside the envelope map
			if err != nil {
				return fmt.Errorf("field body: %w", err)
			}
			e.Body = b[off:end:end]
			off = end
		case "err":
			if off < len(b) && b[off] == 0xc0 { // explicit nil
				off++
				continue
			}
			if e.Err, off, err = readErr(b, off); err != nil {
				return fmt.Errorf("field err: %w", err)
			}
		default:
			if off, err = checkNested(b, off, maxDepth-1); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
		}
	}
	if off != len(b) {
		return errTrailing
	}
	return nil
}

func readErr(b []byte, off int) (*Error, int, error) {
	n, off, err := readMapLen(b, off)
	if err != nil {
		return nil, off, err
	}
	if n > len(b)-off {
		return nil, off, errBadLength
	}
	we := &Error{}
	var key, val []byte
	for i := 0; i < n; i++ {
		if key, off, err = readStr(b, off); err != nil {
			return nil, off, err
		}
		switch string(key) {
		case "code":
			if val, off, err = readStr(b, off); err != nil {
				return nil, off, err
			}
			we.Code = Code(val)
		case "msg":
			if val, off, err = readStr(b, off); err != nil {
				return nil, off, err
			}
			we.Msg = string(val)
		default:
			if off, err = checkNested(b, off, maxDepth-2); err != nil { // inside the envelope and err maps
				return nil, off, err
			}
		}
	}
	if we.Code == "" {
		// An error without a code is still an error; do not let it pass as
		// a success.
		we.Code = CodeInternal
	}
	return we, off, nil
}
