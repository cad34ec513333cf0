package history

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/gitfleet/gitfleet/planner"
)

// TimeFormat is how the text trail prints times.
const TimeFormat = "2006-01-02 15:04:05 -0700"

// WriteText prints the trail as git log does: each spec commit (hash,
// date, author, subject), what it changed or why it was refused, and the
// status commits it led to with their transitions.
func (l *Log) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	for _, c := range l.Commits {
		fmt.Fprintf(b, "commit %.7s  %s  %s <%s>\n", c.Commit, c.Time.Format(TimeFormat), c.Author, c.Email)
		fmt.Fprintf(b, "    %s\n", c.Subject)
		if r := c.Refused; r != nil {
			switch r.By {
			case RefusedDaemon:
				fmt.Fprintln(b, "  refused by the daemon, never applied:")
			default:
				fmt.Fprintln(b, "  refused, it does not validate:")
			}
			for _, reason := range r.Reasons {
				fmt.Fprintf(b, "    %s\n", reason)
			}
			if len(c.Changes) > 0 {
				fmt.Fprintln(b, "  it would have changed:")
			}
		}
		indent := "  "
		if c.Refused != nil {
			indent = "    "
		}
		for _, ch := range c.Changes {
			fmt.Fprintf(b, "%s%s\n", indent, l.changeText(ch))
		}
		if len(c.Clears) > 0 {
			if len(c.Changes) == 0 {
				fmt.Fprintln(b, "  applied, with no change to what runs")
			}
			var refs []string
			for _, r := range c.Clears {
				refs = append(refs, fmt.Sprintf("%.7s (%s: %s)", r.Commit, r.Author, r.Subject))
			}
			fmt.Fprintf(b, "  it clears the refusal of %s\n", strings.Join(refs, ", "))
		}
		for _, s := range c.Status {
			via := ""
			if s.AppliedWith != "" {
				via = fmt.Sprintf("  (applied with %.7s)", s.AppliedWith)
			}
			fmt.Fprintf(b, "  status %.7s  %s%s\n", s.Commit, s.Time.Format(TimeFormat), via)
			for _, f := range s.Fleet {
				fmt.Fprintf(b, "    fleet: %s\n", f)
			}
			for _, cc := range s.Clusters {
				for _, t := range cc.Transitions {
					if l.Cluster == "" {
						t = cc.Cluster + ": " + t
					}
					fmt.Fprintf(b, "    %s\n", t)
				}
			}
		}
		fmt.Fprintln(b)
	}
	if len(l.Commits) == 0 {
		if l.Cluster == "" {
			fmt.Fprintln(b, "no commit changed the fleet")
		} else {
			fmt.Fprintf(b, "no commit changed cluster %s or its class\n", l.Cluster)
		}
	}
	return b.Flush()
}

// changeText is a field change; a cluster's own fields need no name in
// its own trail.
func (l *Log) changeText(c planner.FieldChange) string {
	s := c.String()
	if l.Cluster != "" {
		prefix := "cluster " + l.Cluster + ": "
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			return rest
		}
	}
	return s
}
