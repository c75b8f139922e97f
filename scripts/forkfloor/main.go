// Command forkfloor N prog forks/execs N x prog from runtime.NumCPU()
// threads and waits for them: the floor of a launch on this machine
// (scripts/bench-launch.sh, scripts/bench-hosts.sh).
package main

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	prog := os.Args[2]
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}}
	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pids []int
			for i := w; i < n; i += workers {
				pid, err := syscall.ForkExec(prog, []string{prog}, attr)
				if err != nil {
					os.Exit(1)
				}
				pids = append(pids, pid)
			}
			for _, pid := range pids {
				var ws syscall.WaitStatus
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
					os.Exit(1)
				}
			}
		}()
	}
	wg.Wait()
}
