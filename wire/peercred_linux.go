package wire

import (
	"net"
	"syscall"
)

// peerCred is what the kernel says about the process at the other end of a
// unix socket.
type peerCred struct {
	ok       bool
	uid, pid int
}

// peerCredOf reads SO_PEERCRED from a unix socket; ok is false for any other
// kind of connection (TCP, net.Pipe).
func peerCredOf(nc net.Conn) peerCred {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return peerCred{}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peerCred{}
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return peerCred{}
	}
	return peerCred{ok: true, uid: int(cred.Uid), pid: int(cred.Pid)}
}
