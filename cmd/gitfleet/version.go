package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// commit is the source commit the binary was built from; make build sets
// it (-ldflags -X main.commit=…), and Go's own build information gives it
// when the build recorded version control.
var commit = ""

func init() {
	register(&command{
		name:    "version",
		usage:   "version",
		summary: "the module version, source commit and Go version of this binary",
		run:     runVersion,
	})
	register(&command{
		name:    "completion",
		usage:   "completion bash|zsh|fish",
		summary: "a shell completion script for gitfleet's commands and flags",
		run:     runCompletion,
	})
}

func runVersion(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("version", env)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	version, rev := "(devel)", commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && rev == "" {
				rev = s.Value
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	fmt.Fprintf(env.stdout, "gitfleet %s\ncommit %s\n%s %s/%s\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// runCompletion prints a completion script. The commands are listed in
// the script; a command's flags are read from its -h when completing, so
// the script never goes stale.
func runCompletion(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("completion", env)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("name the shell: gitfleet completion bash|zsh|fish")}
	}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	list := strings.Join(names, " ")
	// A command's flags: the lines of its -h that start with "  -". The
	// word after the command goes along unless it is a flag, so a
	// subcommand's flags come (import capi, node list); any other word
	// there is an argument the command reads after its flags, and -h
	// still prints the help.
	const flags = `gitfleet "$cmd" ${sub:+"$sub"} -h 2>/dev/null | sed -n 's/^  \(-[-a-z]*\).*/-\1/p'`
	switch pos[0] {
	case "bash":
		fmt.Fprintf(env.stdout, `# gitfleet completion for bash: source <(gitfleet completion bash)
_gitfleet() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "%s help" -- "$cur")); return
  fi
  local cmd=${COMP_WORDS[1]} sub=
  if [ "$COMP_CWORD" -gt 2 ] && [[ ${COMP_WORDS[2]} != -* ]]; then sub=${COMP_WORDS[2]}; fi
  case "$cur" in
    -*) COMPREPLY=($(compgen -W "$(%s)" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -f -- "$cur")) ;;
  esac
}
complete -F _gitfleet gitfleet
`, list, flags)
	case "zsh":
		fmt.Fprintf(env.stdout, `#compdef gitfleet
# gitfleet completion for zsh: gitfleet completion zsh > "${fpath[1]}/_gitfleet"
_gitfleet() {
  if (( CURRENT == 2 )); then
    compadd -- %s help; return
  fi
  local cmd=${words[2]} sub=
  if (( CURRENT > 3 )) && [[ ${words[3]} != -* ]]; then sub=${words[3]}; fi
  if [[ ${words[CURRENT]} == -* ]]; then
    compadd -- $(%s)
  else
    _files
  fi
}
compdef _gitfleet gitfleet
`, list, flags)
	case "fish":
		fmt.Fprintf(env.stdout, "# gitfleet completion for fish: gitfleet completion fish | source\n")
		fmt.Fprintf(env.stdout, "complete -c gitfleet -f -n __fish_use_subcommand -a '%s help'\n", list)
		for _, n := range names {
			fmt.Fprintf(env.stdout, "complete -c gitfleet -n '__fish_seen_subcommand_from %s' -a '(set -l t (commandline -opc); gitfleet %s (string match -v -- \"-*\" $t[3]) -h 2>/dev/null | sed -n \"s/^  \\(-[-a-z]*\\).*/-\\1/p\")'\n", n, n)
		}
	default:
		return &exitError{code: exitUsage, err: fmt.Errorf("shell %q: use bash, zsh or fish", pos[0])}
	}
	return nil
}
