package pmi

import (
	"fmt"
	"io"
	"strconv"

	"github.com/dynrt/dynrt/wire"
)

// MPICH's singleton upgrade (shared/pmi-wire.md §1.3): a PMI-1 process
// started without a process manager runs as a singleton until it needs
// one; it then listens on a TCP port and execs
// `mpiexec -pmi_args <port> <interface> <key> <pid>`. The process manager
// connects to that port, runs this handshake, and then serves an ordinary
// PMI-1 session on the same connection (Serve).

// SingletonKVS is the kvsname MPICH gives itself as a singleton; it keeps
// using it after the upgrade, so the process manager hands out the same.
func SingletonKVS(pid int) string { return "singinit_kvs_" + strconv.Itoa(pid) + "_0" }

// SingInit runs the process manager's side of the handshake on a fresh
// connection to the singleton: it offers PMI 1.1 without stdio
// forwarding, checks the singleton's answer and tells it kvs. It reads
// no byte beyond the singleton's line, so Serve can take over rw.
func SingInit(rw io.ReadWriter, kvs string) error {
	if _, err := io.WriteString(rw, "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no authtype=none\n"); err != nil {
		return fmt.Errorf("pmi: singinit: %w", err)
	}
	line, err := readLineRaw(rw)
	if err != nil {
		return fmt.Errorf("pmi: singinit: %w", err)
	}
	l, err := ParseLine(line)
	if err != nil {
		return err
	}
	if l.Cmd != "singinit" {
		return wire.Errorf(wire.ErrMalformed, "pmi: singinit answered with %q", clip(line))
	}
	v, _ := l.Get("pmi_version")
	sub, _ := l.Get("pmi_subversion")
	if v != "1" || sub != "1" {
		return wire.Errorf(wire.ErrInvalid, "pmi: singleton speaks PMI %s.%s, not 1.1", clip([]byte(v)), clip([]byte(sub)))
	}
	if a, ok := l.Get("authtype"); ok && a != "none" {
		return wire.Errorf(wire.ErrInvalid, "pmi: singleton asks for authentication %q", clip([]byte(a)))
	}
	// stdio=no: the singleton keeps its own stdin/stdout/stderr.
	b, err := AppendLine(nil, "singinit_info", "versionok", "yes", "stdio", "no", "kvsname", kvs)
	if err != nil {
		return err
	}
	if _, err := rw.Write(b); err != nil {
		return fmt.Errorf("pmi: singinit: %w", err)
	}
	return nil
}

// readLineRaw reads one line a byte at a time (no read-ahead), without
// its newline, up to maxRequest bytes.
func readLineRaw(r io.Reader) ([]byte, error) {
	var line []byte
	var c [1]byte
	for len(line) < maxRequest {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return nil, err
		}
		if c[0] == '\n' {
			return line, nil
		}
		line = append(line, c[0])
	}
	return nil, wire.Errorf(wire.ErrTooLarge, "pmi: line longer than %d bytes", maxRequest)
}
