package master

import (
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dynrt/dynrt/wire"
)

// sharedBody is a message body that goes to many daemons: it is encoded
// once, by the first writer that needs it, and the same bytes go to the
// others. A push or an event to every daemon of a DVM of N nodes would
// otherwise encode the same record N times, and records such as a job's
// data grow with N too (docs/scale.md). The value must not change once it
// has been handed out.
type sharedBody struct {
	v    any
	once sync.Once
	raw  msgpack.RawMessage
	err  error
}

func share(v any) *sharedBody { return &sharedBody{v: v} }

// EncodeMsgpack writes the encoding of v, made at the first call.
func (b *sharedBody) EncodeMsgpack(enc *msgpack.Encoder) error {
	raw, err := b.bytes()
	if err != nil {
		return err
	}
	return enc.Encode(raw)
}

// bytes is the encoding of v, made at the first call.
func (b *sharedBody) bytes() (msgpack.RawMessage, error) {
	b.once.Do(func() { b.raw, b.err = wire.Marshal(b.v) })
	return b.raw, b.err
}
