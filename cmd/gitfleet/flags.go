package main

import (
	"flag"
	"fmt"
	"io"
)

// newFlagSet returns a flag set for a subcommand that reports errors instead
// of exiting, and prints its usage to w on -h.
func newFlagSet(c string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gitfleet "+c, flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

// parseFlags parses args, allowing flags after positional arguments
// ("validate DIR --format json"), and returns the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return nil, &exitError{code: 0}
			}
			return nil, &exitError{code: 2, err: fmt.Errorf("%v", err)}
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
