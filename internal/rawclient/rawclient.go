// Package rawclient is a minimal client of the dynrt wire protocol written
// the way a client in another language would be: from docs/wire.md alone,
// with a generic msgpack library and plain maps, and nothing of lib/ or
// wire/. The phase 3 conformance tests speak through it, and the rawrank
// program (a rank of a job that uses no lib/session) is built on it.
package rawclient

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// M is a msgpack map body.
type M = map[string]any

// Error is an error reply: its stable code and message.
type Error struct {
	Code, Msg string
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

// CodeOf returns the code of an error reply, or "" for other errors.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Conn is a client connection. Calls may run concurrently; events (id 0)
// are dropped.
type Conn struct {
	rw   io.ReadWriteCloser
	wmu  sync.Mutex
	mu   sync.Mutex
	next uint64
	wait map[uint64]chan frame
	err  error // set once the reader stopped
}

type frame struct {
	body any
	err  *Error
}

// New starts a client on a byte stream that is connected to a daemon's
// client socket (directly or through a pipe): it sends the hello as
// job/rank with pid, reads the reply, and starts the reader.
func New(rw io.ReadWriteCloser, job string, rank uint32, pid int) (*Conn, error) {
	c := &Conn{rw: rw, next: 1, wait: map[uint64]chan frame{}}
	hello := M{"min": 1, "max": 1, "role": "client", "name": job + "/" + strconv.FormatUint(uint64(rank), 10), "pid": pid}
	if err := c.write(1, "hello", hello); err != nil {
		return nil, err
	}
	br := bufio.NewReader(rw)
	env, err := readFrame(br)
	if err != nil {
		return nil, fmt.Errorf("rawclient: hello reply: %w", err)
	}
	if e := errOf(env); e != nil {
		return nil, e
	}
	go c.read(br)
	return c, nil
}

// Dial connects to the daemon socket of the calling process's environment
// (DYNRT_DAEMON) as DYNRT_JOB/DYNRT_RANK.
func Dial() (*Conn, string, uint32, error) {
	job := os.Getenv("DYNRT_JOB")
	rank, err := strconv.ParseUint(os.Getenv("DYNRT_RANK"), 10, 32)
	if err != nil || job == "" {
		return nil, "", 0, fmt.Errorf("rawclient: DYNRT_JOB and DYNRT_RANK not set: not started by a DVM")
	}
	nc, err := net.Dial("unix", os.Getenv("DYNRT_DAEMON"))
	if err != nil {
		return nil, "", 0, err
	}
	c, err := New(nc, job, uint32(rank), os.Getpid())
	if err != nil {
		nc.Close()
		return nil, "", 0, err
	}
	return c, job, uint32(rank), nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.rw.Close() }

// write sends one request frame: length, then the envelope map with v, id
// and kind first.
func (c *Conn) write(id uint64, kind string, body any) error {
	var b []byte
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	buf := &bytesWriter{}
	enc.Reset(buf)
	n := 3
	if body != nil {
		n = 4
	}
	_ = enc.EncodeMapLen(n)
	_ = enc.EncodeString("v")
	_ = enc.EncodeUint(1)
	_ = enc.EncodeString("id")
	_ = enc.EncodeUint(id)
	_ = enc.EncodeString("kind")
	_ = enc.EncodeString(kind)
	if body != nil {
		_ = enc.EncodeString("body")
		if err := enc.Encode(body); err != nil {
			return err
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(buf.b)))
	b = append(b, buf.b...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.rw.Write(b)
	return err
}

type bytesWriter struct{ b []byte }

func (w *bytesWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func readFrame(r io.Reader) (M, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	var env M
	if err := msgpack.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	return env, nil
}

func errOf(env M) *Error {
	em, ok := env["err"].(M)
	if !ok {
		return nil
	}
	code, _ := em["code"].(string)
	msg, _ := em["msg"].(string)
	return &Error{Code: code, Msg: msg}
}

func (c *Conn) read(r io.Reader) {
	for {
		env, err := readFrame(r)
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("rawclient: connection lost: %w", err)
			for id, ch := range c.wait {
				close(ch)
				delete(c.wait, id)
			}
			c.mu.Unlock()
			return
		}
		id := Uint(env["id"])
		if id == 0 {
			continue // an event
		}
		c.mu.Lock()
		ch := c.wait[id]
		delete(c.wait, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- frame{body: env["body"], err: errOf(env)}
		}
	}
}

// Call sends a request and waits up to timeout for its reply body (nil
// for an empty one), or its error as an *Error.
func (c *Conn) Call(kind string, body M, timeout time.Duration) (M, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.next += 2 // the dialer's ids are odd; 1 was the hello
	id := c.next
	ch := make(chan frame, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	var b any
	if body != nil {
		b = body
	}
	if err := c.write(id, kind, b); err != nil {
		return nil, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, c.err
		}
		if f.err != nil {
			return nil, f.err
		}
		m, _ := f.body.(M)
		return m, nil
	case <-t.C:
		c.mu.Lock()
		delete(c.wait, id)
		c.mu.Unlock()
		return nil, fmt.Errorf("rawclient: %s: no reply within %v", kind, timeout)
	}
}

// Uint reads a msgpack integer of any width (0 if v is none).
func Uint(v any) uint64 {
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanUint():
		return rv.Uint()
	case rv.CanInt():
		return uint64(rv.Int())
	}
	return 0
}

// Str reads a string field ("" if absent).
func Str(m M, k string) string {
	s, _ := m[k].(string)
	return s
}

// Map reads a map field (nil if absent).
func Map(m M, k string) M {
	x, _ := m[k].(M)
	return x
}

// Ranks reads a RankRanges field: [[lo, hi], ...] as the list of ranks.
func Ranks(v any) []uint32 {
	var out []uint32
	l, _ := v.([]any)
	for _, p := range l {
		pair, _ := p.([]any)
		if len(pair) != 2 {
			continue
		}
		for r := Uint(pair[0]); r <= Uint(pair[1]); r++ {
			out = append(out, uint32(r))
		}
	}
	return out
}

// Contains reports whether a RankRanges field holds rank.
func Contains(v any, rank uint32) bool {
	for _, r := range Ranks(v) {
		if r == rank {
			return true
		}
	}
	return false
}
