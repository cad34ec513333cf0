package reconciler

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// tailLines bounds what a failing test prints of its daemon's log.
const tailLines = 2000

// tail keeps a test's last log lines, from every part that logs to it.
type tail struct {
	mu    sync.Mutex
	lines [][]byte
	next  int
	full  bool
}

func (l *tail) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	if len(line) > 2048 {
		line = append(line[:2048:2048], "…"...)
	}
	line = bytes.Clone(line)
	l.mu.Lock()
	if len(l.lines) < tailLines {
		l.lines = append(l.lines, line)
	} else {
		l.lines[l.next] = line
		l.next = (l.next + 1) % tailLines
		l.full = true
	}
	l.mu.Unlock()
	return len(p), nil
}

func (l *tail) dump(t testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	if l.full {
		fmt.Fprintf(&b, "the last %d lines the daemon and workers logged:", tailLines)
	} else {
		b.WriteString("what the daemon and workers logged:")
	}
	for i := range l.lines {
		b.WriteByte('\n')
		b.Write(l.lines[(l.next+i)%len(l.lines)])
	}
	t.Log(b.String())
}

var tails sync.Map // testing.TB → *tail

// testLog is the logger of a test's daemon and workers, named by who. With
// -v (or GITFLEET_TEST_LOG set, for a benchmark) it writes as it goes;
// otherwise a test keeps its last lines and prints them only if it fails,
// so that a wait which times out shows what the daemon was doing. A
// benchmark without GITFLEET_TEST_LOG logs nothing.
func testLog(tb testing.TB, who string) zerolog.Logger {
	var w zerolog.Logger
	_, bench := tb.(*testing.B)
	switch {
	case os.Getenv("GITFLEET_TEST_LOG") != "":
		w = zerolog.New(os.Stderr).Level(zerolog.WarnLevel)
	case bench:
		return zerolog.Nop()
	case testing.Verbose():
		w = zerolog.New(zerolog.NewTestWriter(tb))
	default:
		v, loaded := tails.LoadOrStore(tb, &tail{})
		l := v.(*tail)
		if !loaded {
			tb.Cleanup(func() {
				tails.Delete(tb)
				if tb.Failed() {
					l.dump(tb)
				}
			})
		}
		w = zerolog.New(l)
	}
	// Milliseconds: a stall is read from the order and gaps of events.
	return w.Hook(zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, _ string) {
		e.Str("t", time.Now().Format("15:04:05.000"))
	})).With().Str("who", who).Logger()
}
