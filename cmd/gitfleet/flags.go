package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/gitfleet/gitfleet/sources"
)

// helpOut is where each flag set prints its help: standard output, since
// asking for help is not an error.
var helpOut sync.Map // *flag.FlagSet → io.Writer

// secretFlag defines a string flag whose default is $env. The flag
// package's help prints a flag's DefValue, which would be the secret
// itself; it is blanked, so -h names the variable (in usage) and nothing
// more.
func secretFlag(fs *flag.FlagSet, p *string, name, env, usage string) {
	fs.StringVar(p, name, os.Getenv(env), usage)
	fs.Lookup(name).DefValue = ""
}

// newFlagSet returns a flag set for a subcommand that reports errors instead
// of exiting: a flag error is returned (run prints it to standard error),
// -h prints the subcommand's usage and flags to standard output.
func newFlagSet(c string, env *cmdEnv) *flag.FlagSet {
	fs := flag.NewFlagSet("gitfleet "+c, flag.ContinueOnError)
	// Parse's errors are returned and printed once by run, with how to
	// get help; the flag package prints nothing itself.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	helpOut.Store(fs, env.stdout)
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// ("validate DIR --format json"), and returns the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	defer helpOut.Delete(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				printHelp(fs)
				return nil, &exitError{code: 0}
			}
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("%v (run '%s -h' for its flags)", err, fs.Name())}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// printHelp writes the flag set's usage to standard output.
func printHelp(fs *flag.FlagSet) {
	w, _ := helpOut.Load(fs)
	out, _ := w.(io.Writer)
	if out == nil {
		return
	}
	// A subcommand's flag set ("gitfleet import capi", "gitfleet node
	// list") prints its command's usage line.
	name, _, _ := strings.Cut(strings.TrimPrefix(fs.Name(), "gitfleet "), " ")
	if c := commands[name]; c != nil {
		fmt.Fprintf(out, "Usage: gitfleet %s\n\n%s\n\nFlags:\n", c.usage, c.summary)
	}
	fs.SetOutput(out)
	fs.PrintDefaults()
}

// validationCache is the file validate and plan keep their verdicts in:
// $GITFLEET_CACHE, none when it is "off", else the user's cache directory.
func validationCache() string {
	switch v := os.Getenv("GITFLEET_CACHE"); v {
	case "off":
		return ""
	case "":
		return sources.DefaultCacheFile()
	default:
		return v
	}
}
