package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestDecodeEnvelope(t *testing.T) {
	body, _ := Marshal(&Ping{Seq: 5})
	tests := []struct {
		name string
		in   any // encoded with the generic encoder
		want Envelope
	}{
		{"request", map[string]any{"v": 1, "id": 3, "kind": "ping", "body": msgpack.RawMessage(body)},
			Envelope{V: 1, ID: 3, Kind: "ping", Body: body}},
		{"unknown fields are skipped", map[string]any{"v": 1, "id": 4, "kind": "x", "future": []any{1, "a", map[string]any{"z": nil}}, "trace": "abc"},
			Envelope{V: 1, ID: 4, Kind: "x"}},
		{"error reply", map[string]any{"v": 1, "id": 7, "kind": "x", "err": map[string]any{"code": "busy", "msg": "later", "extra": 1}},
			Envelope{V: 1, ID: 7, Kind: "x", Err: &Error{Code: CodeBusy, Msg: "later"}}},
		{"error without code is internal", map[string]any{"v": 1, "id": 7, "kind": "x", "err": map[string]any{"msg": "?"}},
			Envelope{V: 1, ID: 7, Kind: "x", Err: &Error{Code: CodeInternal, Msg: "?"}}},
		{"nil err is no error", map[string]any{"v": 1, "id": 7, "kind": "x", "err": nil},
			Envelope{V: 1, ID: 7, Kind: "x"}},
		{"wide integer forms", map[string]any{"v": int64(1), "id": uint64(1 << 40), "kind": "x"},
			Envelope{V: 1, ID: 1 << 40, Kind: "x"}},
		{"kind as bin", map[string]any{"v": 1, "id": 0, "kind": []byte("ev")},
			Envelope{V: 1, Kind: "ev"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := msgpack.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeEnvelope(b)
			if err != nil {
				t.Fatalf("DecodeEnvelope: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDecodeEnvelopeRejects(t *testing.T) {
	good := AppendEnvelope(nil, &Envelope{V: 1, ID: 9, Kind: "pset.op", Body: []byte{0x81, 0xa1, 'n', 0x01}})
	tests := []struct {
		name   string
		in     []byte
		wantID uint64 // recovered id for the error reply
	}{
		{"empty", nil, 0},
		{"not a map", []byte{0x93, 1, 2, 3}, 0},
		{"truncated body", good[:len(good)-2], 9},
		{"trailing bytes", append(append([]byte{}, good...), 0xc0), 9},
		{"negative id", []byte{0x82, 0xa1, 'v', 0x01, 0xa2, 'i', 'd', 0xff}, 0},
		{"id as string", []byte{0x82, 0xa1, 'v', 0x01, 0xa2, 'i', 'd', 0xa1, '1'}, 0},
		{"kind as int", []byte{0x83, 0xa1, 'v', 0x01, 0xa2, 'i', 'd', 0x05, 0xa4, 'k', 'i', 'n', 'd', 0x07}, 5},
		{"map claims more keys than bytes", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'v', 0x01}, 0},
		{"reserved code", []byte{0x81, 0xa4, 'b', 'o', 'd', 'y', 0xc1}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeEnvelope(tc.in)
			if err == nil {
				t.Fatalf("decoded %+v without error", got)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			if got.ID != tc.wantID {
				t.Fatalf("recovered id %d, want %d", got.ID, tc.wantID)
			}
		})
	}
}

func TestCheckValue(t *testing.T) {
	deep := func(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0x00) }
	tests := []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"fixint", []byte{0x05}, true},
		{"nested within limit", deep(maxDepth), true},
		{"nested too deep", deep(maxDepth + 1), false},
		{"array32 claiming 4G elements", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x00}, false},
		{"map16 claiming more than present", []byte{0xde, 0x00, 0x02, 0x01, 0x02}, false},
		{"str32 longer than the input", []byte{0xdb, 0x00, 0x00, 0x10, 0x00, 'a'}, false},
		{"bin8 exact", []byte{0xc4, 0x02, 1, 2}, true},
		{"ext8", []byte{0xc7, 0x02, 0x05, 1, 2}, true},
		{"fixext16", append([]byte{0xd8, 0x01}, make([]byte, 16)...), true},
		{"fixext16 short", append([]byte{0xd8, 0x01}, make([]byte, 15)...), false},
		{"float64", []byte{0xcb, 0, 0, 0, 0, 0, 0, 0, 0}, true},
		{"0xc1", []byte{0xc1}, false},
		{"empty", nil, false},
		{"map of arrays", []byte{0x81, 0xa1, 'a', 0x92, 0x01, 0x92, 0x02, 0x03}, true},
		{"two values", []byte{0x01, 0x02}, false},
	}
	for _, tc := range tests {
		err := checkOne(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: checkOne = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// Every value the generic encoder produces must pass the checker.
func TestCheckValueAcceptsEncoderOutput(t *testing.T) {
	vals := []any{nil, true, -1, -200, int64(-1 << 40), uint64(1 << 63), 1.5, float32(2.5), "", strings.Repeat("s", 70000),
		[]byte{}, make([]byte, 300), []any{1, "a", nil}, map[string]any{"a": []any{map[string]any{}}}}
	for _, v := range vals {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkOne(b); err != nil {
			t.Errorf("%T: %v", v, err)
		}
	}
	for name, v := range samples() {
		b, _ := Marshal(v)
		if err := checkOne(b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Unmarshal must not hand hostile lengths to the decoder, which would
// pre-allocate them.
func TestUnmarshalRejectsHostileLengths(t *testing.T) {
	// {"s": array32 of 2^32-1 elements} decoded into a struct slice
	b := []byte{0x81, 0xa1, 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}
	var pl PsetList
	if err := Unmarshal(b, &pl); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Unmarshal = %v, want ErrMalformed", err)
	}
}

// Bodies from a newer peer may carry keys this build does not know: they
// are skipped, the known ones still decode.
func TestUnknownBodyKeysIgnored(t *testing.T) {
	b := ordered(t, "seq", 7, "future", map[string]any{"x": []any{1, 2}}, "t", 9)
	var p Ping
	if err := Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.Seq != 7 || p.Time != 9 {
		t.Fatalf("got %+v", p)
	}
}

// The nesting bound counts the envelope map itself: a frame holds at most
// maxDepth containers, whichever field they sit in (docs/wire.md). Fuzzing
// found a 33-deep frame (32 levels in the body) that was accepted.
func TestDecodeEnvelopeDepthCountsTheEnvelope(t *testing.T) {
	nest := func(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0x00) }
	field := func(key string, v []byte) []byte { return append(appendStr([]byte{0x81}, key), v...) }
	errField := func(v []byte) []byte {
		return field("err", append(appendStr(appendStr([]byte{0x82}, "code"), "busy"), append(appendStr(nil, "x"), v...)...))
	}
	tests := []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"body 31 deep: 32 in all", field("body", nest(maxDepth-1)), true},
		{"body 32 deep: 33 in all", field("body", nest(maxDepth)), false},
		{"unknown field 31 deep", field("future", nest(maxDepth-1)), true},
		{"unknown field 32 deep", field("future", nest(maxDepth)), false},
		{"unknown err field 30 deep", errField(nest(maxDepth - 2)), true},
		{"unknown err field 31 deep", errField(nest(maxDepth - 1)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeEnvelope(tc.frame)
			if (err == nil) != tc.ok {
				t.Fatalf("DecodeEnvelope = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			if (checkOne(tc.frame) == nil) != tc.ok {
				t.Fatalf("checkOne of the whole frame disagrees with DecodeEnvelope")
			}
		})
	}
}

// The protocol version is an unsigned integer wherever it appears (the
// envelope's v, the hello's min and max, the hello reply's v). Peers may
// send it in any msgpack integer width, signed or not (older Go builds
// declared it int; other languages pick their own width): every width of a
// valid value decodes, a negative one is malformed.
func TestVersionIntegerWidths(t *testing.T) {
	widths := []struct {
		name string
		enc  []byte // msgpack encodings of 1
	}{
		{"positive fixint", []byte{0x01}},
		{"uint8", []byte{0xcc, 0x01}},
		{"uint16", []byte{0xcd, 0, 0x01}},
		{"uint32", []byte{0xce, 0, 0, 0, 0x01}},
		{"uint64", []byte{0xcf, 0, 0, 0, 0, 0, 0, 0, 0x01}},
		{"int8", []byte{0xd0, 0x01}},
		{"int16", []byte{0xd1, 0, 0x01}},
		{"int32", []byte{0xd2, 0, 0, 0, 0x01}},
		{"int64", []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 0x01}},
	}
	mapOf := func(key string, val []byte, rest ...byte) []byte {
		b := append([]byte{0x80 | 2}, appendStr(nil, key)...)
		b = append(b, val...)
		return append(b, rest...)
	}
	role := append(appendStr(nil, "role"), appendStr(nil, "tool")...)
	for _, w := range widths {
		t.Run(w.name, func(t *testing.T) {
			env, err := DecodeEnvelope(mapOf("v", w.enc, append(appendStr(nil, "kind"), appendStr(nil, "ping")...)...))
			if err != nil || env.V != 1 {
				t.Errorf("envelope v: %+v, %v", env, err)
			}
			hb := append([]byte{0x80 | 3}, appendStr(nil, "min")...)
			hb = append(hb, w.enc...)
			hb = append(append(hb, appendStr(nil, "max")...), w.enc...)
			hb = append(hb, role...)
			var h Hello
			if err := Unmarshal(hb, &h); err != nil || h.Min != 1 || h.Max != 1 {
				t.Errorf("hello min/max: %+v, %v", h, err)
			}
			var r HelloReply
			if err := Unmarshal(mapOf("v", w.enc, role...), &r); err != nil || r.V != 1 {
				t.Errorf("hello reply v: %+v, %v", r, err)
			}
		})
	}
	neg := []byte{0xff} // negative fixint -1
	if _, err := DecodeEnvelope(mapOf("v", neg, append(appendStr(nil, "kind"), appendStr(nil, "ping")...)...)); !errors.Is(err, ErrMalformed) {
		t.Errorf("envelope v = -1: %v, want malformed", err)
	}
	var h Hello
	if err := Unmarshal(mapOf("min", neg, append(appendStr(nil, "max"), 0x01)...), &h); !errors.Is(err, ErrMalformed) {
		t.Errorf("hello min = -1: %+v %v, want malformed", h, err)
	}
}
