package comm

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/dynrt/dynrt/wire"
)

// Frames between endpoints: a fixed 21-byte header, then the payload.
//
//	ctx   uint64  context id of the communicator
//	src   uint32  job rank of the sender
//	tag   int32   user tag (>= 0) or a collective's internal tag (< -1)
//	flags uint8   flagError: the payload is an error a collective passes on
//	len   uint32  payload length
//
// Big-endian like the rest of dynrt's framing. A connection opens with a
// hello from the dialer (helloLen bytes plus the job name) and a one-byte
// answer from the acceptor.
const (
	headerLen = 21
	flagError = 1 << 0

	// MaxMessage is the largest payload of one message.
	MaxMessage = 1 << 30
	// MaxTag is the largest user tag.
	MaxTag = 1<<31 - 1
)

type header struct {
	ctx   uint64
	src   uint32
	tag   int32
	flags uint8
	n     uint32
}

func (h header) put(b []byte) {
	_ = b[headerLen-1]
	binary.BigEndian.PutUint64(b[0:], h.ctx)
	binary.BigEndian.PutUint32(b[8:], h.src)
	binary.BigEndian.PutUint32(b[12:], uint32(h.tag))
	b[16] = h.flags
	binary.BigEndian.PutUint32(b[17:], h.n)
}

func parseHeader(b []byte) (header, error) {
	h := header{
		ctx: binary.BigEndian.Uint64(b[0:]), src: binary.BigEndian.Uint32(b[8:]),
		tag: int32(binary.BigEndian.Uint32(b[12:])), flags: b[16], n: binary.BigEndian.Uint32(b[17:]),
	}
	if h.n > MaxMessage {
		return h, wire.Errorf(wire.ErrTooLarge, "comm: frame of %d bytes (limit %d)", h.n, MaxMessage)
	}
	if h.flags&^flagError != 0 {
		return h, wire.Errorf(wire.ErrMalformed, "comm: unknown frame flags %#x", h.flags)
	}
	return h, nil
}

// readFrame reads one frame; the payload is freshly allocated (the
// receiver owns it).
func readFrame(r io.Reader, hb []byte) (header, []byte, error) {
	if _, err := io.ReadFull(r, hb[:headerLen]); err != nil {
		return header{}, nil, err
	}
	h, err := parseHeader(hb)
	if err != nil {
		return h, nil, err
	}
	data := make([]byte, h.n)
	if _, err := io.ReadFull(r, data); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	return h, data, nil
}

// The hello: magic, the acceptor's token (proves the dialer read the
// acceptor's published address), the dialer's job rank, its job name. The
// answer is helloOK, or helloRetry from a lower rank that is dialing the
// dialer itself at the same moment: its own connection is the one the
// pair keeps, so the dialer waits for it.
const (
	helloMagic = "DYC1"
	tokenLen   = 16
	helloLen   = 4 + tokenLen + 4 + 2
	helloOK    = 'K'
	helloRetry = 'R'
	maxJobName = 1024
)

type hello struct {
	token [tokenLen]byte
	rank  uint32
	job   string
}

func (h hello) encode() []byte {
	b := make([]byte, helloLen, helloLen+len(h.job))
	copy(b, helloMagic)
	copy(b[4:], h.token[:])
	binary.BigEndian.PutUint32(b[4+tokenLen:], h.rank)
	binary.BigEndian.PutUint16(b[8+tokenLen:], uint16(len(h.job)))
	return append(b, h.job...)
}

func readHello(r io.Reader) (hello, error) {
	var b [helloLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return hello{}, err
	}
	if string(b[:4]) != helloMagic {
		return hello{}, wire.Errorf(wire.ErrMalformed, "comm: not a dynrt comm hello (%q)", b[:4])
	}
	var h hello
	copy(h.token[:], b[4:])
	h.rank = binary.BigEndian.Uint32(b[4+tokenLen:])
	n := int(binary.BigEndian.Uint16(b[8+tokenLen:]))
	if n > maxJobName {
		return hello{}, wire.Errorf(wire.ErrMalformed, "comm: job name of %d bytes in a hello", n)
	}
	job := make([]byte, n)
	if _, err := io.ReadFull(r, job); err != nil {
		return hello{}, err
	}
	h.job = string(job)
	return h, nil
}

// errPayload carries an error a collective passes down its tree: the
// wire code, then the message, so the receivers' errors match the same
// sentinel.
func errPayload(err error) []byte {
	return append([]byte(string(wire.CodeOf(err))+"\x00"), err.Error()...)
}

func payloadErr(b []byte) error {
	code, msg := string(b), ""
	for i, c := range b {
		if c == 0 {
			code, msg = string(b[:i]), string(b[i+1:])
			break
		}
	}
	s := wire.Sentinel(wire.Code(code))
	if s == nil {
		s = wire.ErrInternal
	}
	return wire.Errorf(s, "%s", msg)
}

// address is what an endpoint publishes: its host, the abstract unix
// socket, the TCP port and the token a dialer must present.
type address struct {
	host  string
	unix  string
	port  int
	token [tokenLen]byte
}

func (a address) String() string {
	return fmt.Sprintf("v1 %s %s %d %x", a.host, a.unix, a.port, a.token[:])
}

func parseAddress(s string) (address, error) {
	var a address
	var tok []byte
	var v string
	if _, err := fmt.Sscanf(s, "%s %s %s %d %x", &v, &a.host, &a.unix, &a.port, &tok); err != nil || v != "v1" || len(tok) != tokenLen {
		return address{}, wire.Errorf(wire.ErrMalformed, "comm: bad endpoint address %q", s)
	}
	copy(a.token[:], tok)
	return a, nil
}
