package pmi

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// TestSingInit plays MPICH's singleton side of the upgrade handshake
// (simple_pmi.c, PMII_singinit) against SingInit, then checks that a PMI-1
// session can follow on the same connection without lost bytes.
func TestSingInit(t *testing.T) {
	tests := []struct {
		name   string
		answer string // the singleton's line
		err    error  // nil: the handshake succeeds
	}{
		{"mpich", "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=yes authtype=none", nil},
		{"no authtype", "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no", nil},
		{"version 2", "cmd=singinit pmi_version=2 pmi_subversion=0 stdio=yes authtype=none", wire.ErrInvalid},
		{"auth", "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=yes authtype=shared", wire.ErrInvalid},
		{"other command", "cmd=init pmi_version=1 pmi_subversion=1", wire.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pm, client := net.Pipe()
			defer pm.Close()
			defer client.Close()
			done := make(chan error, 1)
			go func() { done <- SingInit(pm, SingletonKVS(4242)) }()

			r := bufio.NewReader(client)
			offer, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if offer != "cmd=singinit pmi_version=1 pmi_subversion=1 stdio=no authtype=none\n" {
				t.Errorf("offer %q", offer)
			}
			// The singleton sends its answer and, right behind it (as
			// a fast client could), nothing else until it is answered.
			if _, err := io.WriteString(client, tt.answer+"\n"); err != nil {
				t.Fatal(err)
			}
			if tt.err != nil {
				if err := <-done; !errors.Is(err, tt.err) {
					t.Fatalf("SingInit: %v, want %v", err, tt.err)
				}
				return
			}
			info, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if info != "cmd=singinit_info versionok=yes stdio=no kvsname=singinit_kvs_4242_0\n" {
				t.Errorf("info %q", info)
			}
			if err := <-done; err != nil {
				t.Fatalf("SingInit: %v", err)
			}
			// The session proper: the next line reaches the PM intact.
			go func() { _, _ = io.WriteString(client, "cmd=init pmi_version=1 pmi_subversion=1\n") }()
			line, err := bufio.NewReader(pm).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "cmd=init ") {
				t.Errorf("line after the handshake: %q, %v", line, err)
			}
		})
	}
}
