package proc

import (
	"context"
	"runtime"
	"sync"
	"syscall"
)

// maxSpawners caps the spawner threads. Forks of one process contend on
// its memory map and file table in the kernel, so past a handful of
// threads more of them only add idle threads.
const maxSpawners = 8

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
// its threads are themselves process-wide (every child's Pdeathsig is tied
// to the thread that forked it), and a second pool would only add more
// such threads.
var spawner struct {
	once sync.Once
	reqs chan *spawnReq // unbuffered: a send succeeds at once only if a thread is idle
	max  int

	mu      sync.Mutex
	threads int
}

// Spawners is how many forks can run at once: the size the spawner pool
// may grow to (GOMAXPROCS at first use, at most 8). Starting more
// processes than this concurrently gains nothing; starting them one after
// another uses a single thread.
func Spawners() int {
	initSpawner()
	return spawner.max
}

func initSpawner() {
	spawner.once.Do(func() {
		spawner.reqs = make(chan *spawnReq)
		spawner.max = min(max(runtime.GOMAXPROCS(0), 1), maxSpawners)
	})
}

// spawn forks and execs on a spawner thread. It gives up only while the
// request is still queued; once a spawner has the request, spawn waits for
// the answer so that a started process is never lost.
func spawn(ctx context.Context, argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	initSpawner()
	req := &spawnReq{argv0: argv0, argv: argv, attr: attr, reply: make(chan spawnRes, 1)}
	select {
	case spawner.reqs <- req: // an idle thread took it
	default:
		growSpawners()
		select {
		case spawner.reqs <- req:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	res := <-req.reply
	return res.pid, res.err
}

// growSpawners adds a thread to the pool unless it is full. Threads are
// added only when every existing one is busy, so a daemon that starts its
// processes one at a time keeps a single thread.
func growSpawners() {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	if spawner.threads < spawner.max {
		spawner.threads++
		go spawnLoop(spawner.reqs)
	}
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

// spawnThreads reports how many spawner threads exist (for tests).
func spawnThreads() int {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	return spawner.threads
}
