// Command gitfleet runs the whole life of Kubernetes clusters from a Git
// repository. main only maps errors to exit codes; each subcommand lives in
// its own file and registers itself with register.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"
)

// command is one subcommand. Run gets the arguments after the subcommand's
// name and writes its output to env's writers, so tests run it in-process.
type command struct {
	name    string
	usage   string // e.g. "validate [DIR] [--format text|json]"
	summary string
	run     func(ctx context.Context, env *cmdEnv, args []string) error
	// untilStopped says whether the command line (the arguments after the
	// command's name) runs until a signal stops it (a daemon, a worker, a
	// node) and shuts down cleanly when ctx ends, however long that takes;
	// a second signal ends it at once. nil: a one-shot command.
	untilStopped func(args []string) bool
}

// always is untilStopped for a command that always runs until stopped.
func always([]string) bool { return true }

// interruptCleanups are what a one-shot command asked to be done if a
// signal ends its process (onInterrupt): the deferred calls os.Exit skips.
var interruptCleanups struct {
	sync.Mutex
	fns []func()
}

// onInterrupt has fn run if a signal ends the process before the command
// returns, such as removing a temporary folder.
func onInterrupt(fn func()) {
	interruptCleanups.Lock()
	defer interruptCleanups.Unlock()
	interruptCleanups.fns = append(interruptCleanups.fns, fn)
}

// exitOnSignal is how stopOnSignal ends the process: a one-shot command's
// cleanups (onInterrupt) first, then exit.
func exitOnSignal(untilStopped bool, exit func(int)) func(int) {
	return func(code int) {
		if !untilStopped {
			runInterruptCleanups()
		}
		exit(code)
	}
}

func runInterruptCleanups() {
	interruptCleanups.Lock()
	defer interruptCleanups.Unlock()
	for _, fn := range interruptCleanups.fns {
		fn()
	}
}

// cmdEnv is what a command may touch of the outside world.
type cmdEnv struct {
	stdout io.Writer
	stderr io.Writer
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("gitfleet: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// exitError carries a specific exit code (plan --detailed-exitcode uses 2).
// A nil-message exitError prints nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitUsage is the exit code of a command line gitfleet cannot run (an
// unknown flag or command, a missing argument): 1, as Terraform's, so that
// plan --detailed-exitcode's 2 always means "changes".
const exitUsage = 1

// errSilent is returned when the command already reported what went wrong
// (validate prints its own list of errors) and only the exit code is left.
var errSilent = &exitError{code: 1}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	untilStopped := false
	if len(os.Args) > 1 {
		if c := commands[os.Args[1]]; c != nil && c.untilStopped != nil {
			untilStopped = c.untilStopped(os.Args[2:])
		}
	}
	go stopOnSignal(sigs, cancel, untilStopped, os.Stderr, exitOnSignal(untilStopped, os.Exit))
	os.Exit(run(ctx, os.Args[1:], &cmdEnv{stdout: os.Stdout, stderr: os.Stderr}))
}

// oneShotGrace is how long a one-shot command has to return after a
// signal before the process ends.
const oneShotGrace = time.Second

// stopOnSignal ends ctx (cancel) at the first SIGINT or SIGTERM. A command
// that runs until stopped shuts down in its own time; a second signal
// ends the process at once. A one-shot command (validate, plan, ...) may
// be deep in work that does not watch ctx, a policy's evaluation or a
// read that blocks: it has oneShotGrace to return, then the process ends.
// When the signal ends the process, the exit code is the shell's for a
// signal, 128 + its number; a command that returns within the moment exits
// with its own code.
func stopOnSignal(sigs <-chan os.Signal, cancel func(), untilStopped bool, stderr io.Writer, exit func(int)) {
	sig := <-sigs
	cancel()
	if untilStopped {
		sig = <-sigs
		fmt.Fprintf(stderr, "gitfleet: %v again: stopping at once\n", sig)
	} else {
		select {
		case sig = <-sigs:
		case <-time.After(oneShotGrace):
		}
		fmt.Fprintf(stderr, "gitfleet: %v: stopped\n", sig)
	}
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	exit(code)
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, env *cmdEnv) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) == 0 {
			usage(env.stderr)
			return exitUsage
		}
		usage(env.stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "gitfleet: unknown command %q; run 'gitfleet help' for the list\n", args[0])
		return exitUsage
	}
	err := c.run(ctx, env, args[1:])
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(env.stderr, "gitfleet %s: %v\n", c.name, ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(env.stderr, "gitfleet %s: %v\n", c.name, err)
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "gitfleet runs the whole life of Kubernetes clusters from a Git repository.")
	fmt.Fprintln(w, "\nUsage:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  gitfleet %-45s %s\n", c.usage, c.summary)
	}
}
