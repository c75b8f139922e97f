package wire

import (
	"errors"
	"fmt"
)

// Code is a stable, wire-visible error code. Codes are strings so that a
// client in another language can switch on them without a lookup table; they
// never change meaning once released.
type Code string

// The stable codes. Add new ones at the end; never rename.
const (
	CodeInvalid      Code = "invalid"      // bad argument or request body
	CodeNotFound     Code = "not_found"    // named object does not exist
	CodeExists       Code = "exists"       // object already exists
	CodeBusy         Code = "busy"         // another operation is in flight
	CodeNoResources  Code = "no_resources" // not enough free slots
	CodeState        Code = "bad_state"    // illegal state transition
	CodeTimeout      Code = "timeout"      // deadline passed
	CodeCanceled     Code = "canceled"     // caller or peer canceled
	CodeAborted      Code = "aborted"      // operation was aborted (e.g. an RC)
	CodeUnauthorized Code = "unauthorized" // bad token or uid
	CodeVersion      Code = "version"      // no common protocol version
	CodeTooLarge     Code = "too_large"    // frame over the size limit
	CodeMalformed    Code = "malformed"    // frame or body could not be decoded
	CodeUnknownKind  Code = "unknown_kind" // message kind not served by the peer
	CodeClosed       Code = "closed"       // connection closed
	CodeUnsupported  Code = "unsupported"  // valid request the peer does not support
	CodeInternal     Code = "internal"     // a bug on the far side
	CodePermission   Code = "permission"   // not allowed for this caller
	CodeLimit        Code = "limit"        // a request exceeds a documented limit (docs/limits.md)
)

// Sentinels: one per code. errors.Is(err, wire.ErrBusy) works on errors made
// locally (wrapped with %w) and on errors decoded from the wire alike.
var (
	ErrInvalid      = &Error{Code: CodeInvalid, Msg: "invalid request"}
	ErrNotFound     = &Error{Code: CodeNotFound, Msg: "not found"}
	ErrExists       = &Error{Code: CodeExists, Msg: "already exists"}
	ErrBusy         = &Error{Code: CodeBusy, Msg: "busy"}
	ErrNoResources  = &Error{Code: CodeNoResources, Msg: "not enough resources"}
	ErrState        = &Error{Code: CodeState, Msg: "illegal state"}
	ErrTimeout      = &Error{Code: CodeTimeout, Msg: "timed out"}
	ErrCanceled     = &Error{Code: CodeCanceled, Msg: "canceled"}
	ErrAborted      = &Error{Code: CodeAborted, Msg: "aborted"}
	ErrUnauthorized = &Error{Code: CodeUnauthorized, Msg: "unauthorized"}
	ErrVersion      = &Error{Code: CodeVersion, Msg: "no common protocol version"}
	ErrTooLarge     = &Error{Code: CodeTooLarge, Msg: "frame too large"}
	ErrMalformed    = &Error{Code: CodeMalformed, Msg: "malformed message"}
	ErrUnknownKind  = &Error{Code: CodeUnknownKind, Msg: "unknown message kind"}
	ErrClosed       = &Error{Code: CodeClosed, Msg: "connection closed"}
	ErrUnsupported  = &Error{Code: CodeUnsupported, Msg: "unsupported"}
	ErrInternal     = &Error{Code: CodeInternal, Msg: "internal error"}
	ErrPermission   = &Error{Code: CodePermission, Msg: "permission denied"}
	ErrLimit        = &Error{Code: CodeLimit, Msg: "limit exceeded"}
)

var sentinels = []*Error{
	ErrInvalid, ErrNotFound, ErrExists, ErrBusy, ErrNoResources, ErrState,
	ErrTimeout, ErrCanceled, ErrAborted, ErrUnauthorized, ErrVersion,
	ErrTooLarge, ErrMalformed, ErrUnknownKind, ErrClosed, ErrUnsupported,
	ErrInternal, ErrPermission, ErrLimit,
}

// Error is the structured error carried in an envelope's err field.
type Error struct {
	Code Code   `msgpack:"code"` // stable code, one of the Code* values
	Msg  string `msgpack:"msg"`  // human-readable message; never parse it
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return string(e.Code)
	}
	return e.Msg
}

// Is makes two *Error values with the same code match, so a sentinel matches
// an error decoded from the far side.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds an error with the code of sentinel and a formatted message.
// The result matches sentinel with errors.Is, and any %w verbs in format
// keep their own chains too.
func Errorf(sentinel *Error, format string, args ...any) error {
	return &codedError{code: sentinel.Code, err: fmt.Errorf(format, args...)}
}

type codedError struct {
	code Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }
func (e *codedError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.code
}

// ToWire converts any error into the structured form sent to a peer: the code
// of the first coded error in the chain (internal if none) and the full
// message.
func ToWire(err error) *Error {
	if err == nil {
		return nil
	}
	return &Error{Code: CodeOf(err), Msg: err.Error()}
}

// CodeOf returns the stable code of err, or CodeInternal when err carries
// none.
func CodeOf(err error) Code {
	var ce *codedError
	var we *Error
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &we):
		return we.Code
	case err == nil:
		return ""
	}
	return CodeInternal
}

// Sentinel returns the package sentinel for code, or nil for an unknown code
// (a newer peer may send codes this build does not know).
func Sentinel(code Code) *Error {
	for _, s := range sentinels {
		if s.Code == code {
			return s
		}
	}
	return nil
}
