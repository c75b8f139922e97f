package proc

import (
	"context"
	"runtime"
	"sync"
	"syscall"
)

type spawnReq struct {
	argv0 string
	argv  []string
	attr  *syscall.ProcAttr
	reply chan spawnRes
}

type spawnRes struct {
	pid int
	err error
}

// spawner is the package's one piece of process-wide state. It has to be:
// the thread it owns is itself process-wide (every child's Pdeathsig is tied
// to it), and a second spawner would only add a second such thread.
var spawner struct {
	once sync.Once
	reqs chan *spawnReq
}

// spawn forks and execs on the spawner thread. It gives up only while the
// request is still queued; once the spawner has the request, spawn waits for
// the answer so that a started process is never lost.
func spawn(ctx context.Context, argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	spawner.once.Do(func() {
		spawner.reqs = make(chan *spawnReq)
		go spawnLoop(spawner.reqs)
	})
	req := &spawnReq{argv0: argv0, argv: argv, attr: attr, reply: make(chan spawnRes, 1)}
	select {
	case spawner.reqs <- req:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	res := <-req.reply
	return res.pid, res.err
}

// spawnLoop runs forever on a locked OS thread. It never unlocks and never
// returns: if it returned while locked, Go would terminate the thread and the
// kernel would SIGKILL every child forked from it.
func spawnLoop(reqs <-chan *spawnReq) {
	runtime.LockOSThread()
	for req := range reqs {
		pid, _, err := syscall.StartProcess(req.argv0, req.argv, req.attr)
		req.reply <- spawnRes{pid: pid, err: err}
	}
}
