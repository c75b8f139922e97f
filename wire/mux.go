package wire

import (
	"context"
	"sort"
	"sync"
)

// Mux routes requests to handlers by kind. Its Serve method is a Handler.
// Handlers may be added at any time; it is safe for concurrent use.
type Mux struct {
	mu    sync.RWMutex
	m     map[string]Handler
	check func(kind string, body any) error
}

// SetCheck installs f to vet every body HandleTyped decodes before its
// handler runs (a receiver's Limits.Check); f's error is the reply.
func (m *Mux) SetCheck(f func(kind string, body any) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.check = f
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{m: make(map[string]Handler)} }

// Handle registers h for kind, replacing any earlier handler.
func (m *Mux) Handle(kind string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]Handler)
	}
	m.m[kind] = h
}

// Kinds returns the registered kinds, sorted.
func (m *Mux) Kinds() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ks := make([]string, 0, len(m.m))
	for k := range m.m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Serve dispatches req; a kind with no handler gets an ErrUnknownKind error
// that names it.
func (m *Mux) Serve(ctx context.Context, req *Request) (any, error) {
	m.mu.RLock()
	h := m.m[req.Kind]
	m.mu.RUnlock()
	if h == nil {
		return nil, Errorf(ErrUnknownKind, "wire: unknown message kind %q", req.Kind)
	}
	return h(ctx, req)
}

// HandleTyped registers a handler that receives the request body already
// decoded into a fresh *T. A body that does not decode is answered with an
// ErrMalformed error without calling f, one the Mux's check refuses with
// the check's error.
func HandleTyped[T any](m *Mux, kind string, f func(ctx context.Context, req *Request, body *T) (any, error)) {
	m.Handle(kind, func(ctx context.Context, req *Request) (any, error) {
		body := new(T)
		if err := req.Decode(body); err != nil {
			return nil, err
		}
		m.mu.RLock()
		check := m.check
		m.mu.RUnlock()
		if check != nil {
			if err := check(req.Kind, body); err != nil {
				return nil, err
			}
		}
		return f(ctx, req, body)
	})
}
