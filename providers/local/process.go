package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Files in a machine's state folder.
const (
	pidFile       = "pid"            // written by the provider right after the node started
	portFile      = "port"           // written by the node once its health endpoint listens
	machineFile   = "machine.json"   // written by the node: the machine it is
	bootstrapFile = "bootstrap.yaml" // written by the node: its bootstrap data
	logFile       = "node.log"       // the node's stdout and stderr
)

// writeFileAtomic writes data to path through a temporary file and rename,
// so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// nodePID returns the pid of the node serving dir, or 0 when there is
// none: no pid file, the process is gone, or the pid now belongs to a
// different program (pids are reused).
func nodePID(dir string) int {
	pid, err := readInt(filepath.Join(dir, pidFile))
	if err != nil || pid <= 0 {
		return 0
	}
	if isNode(pid, dir) {
		return pid
	}
	return 0
}

// isNode checks /proc/<pid>/cmdline: the process must be "… node … --state-dir
// dir". A zombie has an empty cmdline and so is not a node.
func isNode(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	hasNode := false
	for i, a := range args {
		if a == "node" {
			hasNode = true
		}
		if hasNode && (a == "--state-dir" || a == "-state-dir") && i+1 < len(args) && args[i+1] == dir {
			return true
		}
	}
	return false
}

// signalGroup signals the node's process group (the node leads its own).
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
