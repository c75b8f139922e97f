//go:build !pmix

package pmix

import "context"

// Available reports whether this build hosts a PMIx server: not without
// the pmix build tag.
func Available() bool { return false }

// Version is the PMIx library's version ("" without PMIx).
func Version() string { return "" }

// Server is the process's PMIx server; without PMIx it cannot start.
type Server struct{}

// Start returns ErrUnavailable without PMIx.
func Start(Config) (*Server, error) { return nil, ErrUnavailable }

// Finalize does nothing without PMIx.
func Finalize() error { return nil }

// RegisterJob returns ErrUnavailable without PMIx.
func (*Server) RegisterJob(*Job, Handler) error { return ErrUnavailable }

// DeregisterJob does nothing without PMIx.
func (*Server) DeregisterJob(string) {}

// RegisterClient returns ErrUnavailable without PMIx.
func (*Server) RegisterClient(Proc, int, int) error { return ErrUnavailable }

// DeregisterClient does nothing without PMIx.
func (*Server) DeregisterClient(Proc) {}

// SetupFork returns ErrUnavailable without PMIx.
func (*Server) SetupFork(Proc) ([]string, error) { return nil, ErrUnavailable }

// DirectModexRequest returns ErrUnavailable without PMIx.
func (*Server) DirectModexRequest(context.Context, Proc) ([]byte, error) {
	return nil, ErrUnavailable
}

// Notify returns ErrUnavailable without PMIx.
func (*Server) Notify(Event) error { return ErrUnavailable }
