package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Files in a machine's state folder.
const (
	lockFile      = "lock"           // locked by the node for as long as it runs: one node per machine
	pidFile       = "pid"            // written by the node once it holds the lock
	portFile      = "port"           // written by the node once its health endpoint listens
	machineFile   = "machine.json"   // written by the node: the machine it is
	bootstrapFile = "bootstrap.yaml" // written by the node: its bootstrap data
	logFile       = "node.log"       // the node's stdout and stderr
	credsFile     = "nats.creds"     // the node's own NATS credentials (0600), when the worker can mint them
	// The machine's bootstrap data as a NoCloud seed (0600), written by
	// the worker before it starts the node: docs/bootstrap.md.
	userDataFile = "user-data"
	metaDataFile = "meta-data"
)

// writeFileAtomic writes data to path through a temporary file and rename,
// so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
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
	d, _ := nodeArgs(strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00"))
	return d == dir
}

// nodeArgs returns the state folder and machine JSON of a node's command
// line; dir is empty when args are not a node's.
func nodeArgs(args []string) (dir, machine string) {
	hasNode := false
	for i, a := range args {
		if a == "node" {
			hasNode = true
		}
		if !hasNode || i+1 >= len(args) {
			continue
		}
		switch a {
		case "--state-dir", "-state-dir":
			dir = args[i+1]
		case "--machine-json", "-machine-json":
			machine = args[i+1]
		}
	}
	return dir, machine
}

// lostNode is a node process whose machine folder (root/<cluster>/<machine>)
// is gone: removed while it ran. No lock or pid file tells of it any more;
// only its command line does.
type lostNode struct {
	pid     int
	dir     string
	machine wire.Machine
}

// lostNodes scans /proc for the nodes under root whose folder is gone,
// sorted by folder. dir, when set, keeps only that folder's.
func lostNodes(root, dir string) []lostNode {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []lostNode
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		d, mj := nodeArgs(strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00"))
		if d == "" || filepath.Dir(filepath.Dir(d)) != root || (dir != "" && d != dir) {
			continue
		}
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		var m wire.Machine
		_ = json.Unmarshal([]byte(mj), &m)
		m.Cluster, m.Name = filepath.Base(filepath.Dir(d)), filepath.Base(d)
		out = append(out, lostNode{pid: pid, dir: d, machine: m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out
}

// signalNode signals the node and its process group (a node the provider
// started leads its own; one started by hand may not).
func signalNode(pid int, sig syscall.Signal) error {
	gerr := syscall.Kill(-pid, sig)
	err := syscall.Kill(pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		err = nil
	}
	if err == nil && gerr != nil && !errors.Is(gerr, syscall.ESRCH) {
		err = gerr
	}
	return err
}

// nodeRuns reports whether a node holds the lock of dir: it does for as
// long as it runs, whatever its pid file says. The probe takes the lock for
// an instant when it is free; a node that starts at that instant tries
// again (lockNode).
func nodeRuns(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// errLocked: another node runs the machine.
var errLocked = errors.New("another node runs this machine")

// lockNode takes the machine's lock for the node's lifetime (the lock goes
// with the process, however it ends). A moment's contention is a probe;
// a lock still held after wait belongs to another node.
func lockNode(dir string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (%s is locked)", errLocked, filepath.Join(dir, lockFile))
			}
			return nil, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RunningNode is a node process that serves a machine folder.
type RunningNode struct {
	Cluster, Machine string
	PID              int
	Dir              string
}

// Running lists the nodes that run under stateDir (its
// <cluster>/<machine> folders), sorted: each holds its folder's lock and
// its pid is a node of that folder, so a stale pid file or a reused pid is
// never taken for a node.
func Running(stateDir string) ([]RunningNode, error) {
	stateDir, err := filepath.Abs(stateDir) // as the provider passes it to its nodes
	if err != nil {
		return nil, err
	}
	clusters, err := os.ReadDir(stateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // gone whole: its nodes may run on
		return nil, err
	}
	var out []RunningNode
	for _, c := range clusters {
		if !c.IsDir() {
			continue
		}
		machines, err := os.ReadDir(filepath.Join(stateDir, c.Name()))
		if err != nil {
			return nil, err
		}
		for _, m := range machines {
			dir := filepath.Join(stateDir, c.Name(), m.Name())
			if !m.IsDir() {
				continue
			}
			if runs, _ := nodeRuns(dir); !runs {
				continue
			}
			if pid := nodePID(dir); pid != 0 {
				out = append(out, RunningNode{Cluster: c.Name(), Machine: m.Name(), PID: pid, Dir: dir})
			}
		}
	}
	for _, n := range lostNodes(stateDir, "") {
		out = append(out, RunningNode{Cluster: n.machine.Cluster, Machine: n.machine.Name, PID: n.pid, Dir: n.dir})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// Signal sends sig to the node and its process group.
func (n RunningNode) Signal(sig syscall.Signal) error { return signalNode(n.PID, sig) }

// Gone waits up to wait for the node to exit (its lock to be free).
func (n RunningNode) Gone(wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		if runs, _ := nodeRuns(n.Dir); !runs && !isNode(n.PID, n.Dir) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
