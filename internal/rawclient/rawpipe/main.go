// Command rawpipe lets a test speak to a daemon as a rank of a job: it
// connects to its daemon's client socket (DYNRT_DAEMON) and to the test's
// socket (-to), announces itself there with one line "<job> <rank>
// <pid>", and then copies bytes both ways, untouched, until either side
// closes. The daemon admits the connection because it comes from the
// rank's own process; every frame on it, the hello included, is the
// test's.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	to := flag.String("to", "", "the test's unix socket")
	flag.Parse()
	if err := run(*to); err != nil {
		fmt.Fprintln(os.Stderr, "rawpipe:", err)
		os.Exit(1)
	}
}

func run(to string) error {
	d, err := net.Dial("unix", os.Getenv("DYNRT_DAEMON"))
	if err != nil {
		return err
	}
	defer d.Close()
	t, err := net.Dial("unix", to)
	if err != nil {
		return err
	}
	defer t.Close()
	if _, err := fmt.Fprintf(t, "%s %s %d\n", os.Getenv("DYNRT_JOB"), os.Getenv("DYNRT_RANK"), os.Getpid()); err != nil {
		return err
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(d, t)
	go cp(t, d)
	<-done // one side closed: so does the other
	return nil
}
