//go:build !linux

package wire

import "net"

type peerCred struct {
	ok       bool
	uid, pid int
}

// peerCredOf is unavailable on this platform: unix peers must present the
// token.
func peerCredOf(net.Conn) peerCred { return peerCred{} }
