package local

import (
	"time"
)

// pollEvery is how often an adopted node is looked at where its end cannot
// be waited for (no pidfd: a kernel before 5.3, a seccomp filter, another
// system than Linux).
const pollEvery = time.Second

// adoptedNode is a node this provider did not start, found running by
// List or Create (a worker restarted): it is not this process's child, so
// no Wait tells of its end, and it is watched instead.
type adoptedNode struct {
	pid      int
	stopping bool // a Delete stops it: its end is no news
}

// adopt watches the node pid that runs dir, unless this process started
// it (its reaper tells) or watches it already; the watch lasts as long as
// the node, as a started node's reaper does.
func (p *Provider) adopt(pid int, dir string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ours := p.children[pid]; ours {
		return
	}
	if n := p.adopted[dir]; n != nil && n.pid == pid {
		return
	}
	n := &adoptedNode{pid: pid}
	p.adopted[dir] = n
	p.o.Log.Debug().Str("dir", dir).Int("pid", pid).Msg("watching an adopted node")
	go func() {
		waitExit(pid, dir, !p.noPidfd)
		p.mu.Lock()
		if p.adopted[dir] == n {
			delete(p.adopted, dir)
		}
		stopped := n.stopping
		p.mu.Unlock()
		if !stopped {
			p.tell()
		}
	}()
}

// tell wakes Changed's reader; one waiting already tells of both.
func (p *Provider) tell() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// pollExit returns once pid is no longer the node of dir (it ended, and a
// reused pid is another program).
func pollExit(pid int, dir string) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for isNode(pid, dir) {
		<-tick.C
	}
}
