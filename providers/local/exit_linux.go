package local

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// waitExit returns once the node pid of dir has ended. With a pidfd (Linux
// 5.3 and later) it waits in the runtime's poller, which costs no thread
// and tells at once; otherwise it polls.
func waitExit(pid int, dir string, pidfd bool) {
	if !pidfd {
		pollExit(pid, dir)
		return
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return // ended already
	}
	if err != nil {
		pollExit(pid, dir)
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	// The pidfd is the node's only if pid still names the node now that
	// it is open: otherwise the node ended before (and the pid may be
	// another program's already).
	if !isNode(pid, dir) {
		return
	}
	rc, err := f.SyscallConn()
	if err == nil {
		// A pidfd is readable once its process has ended.
		var perr error
		err = rc.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			if err != nil && !errors.Is(err, unix.EINTR) {
				perr = err
				return true
			}
			return n > 0
		})
		if err == nil {
			err = perr
		}
	}
	if err != nil { // the poller cannot wait for it
		pollExit(pid, dir)
	}
}
