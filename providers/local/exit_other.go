//go:build !linux

package local

// waitExit returns once the node pid of dir has ended: polled, there being
// no pidfd.
func waitExit(pid int, dir string, _ bool) { pollExit(pid, dir) }
