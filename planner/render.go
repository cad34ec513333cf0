package planner

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MarkdownLimit keeps a pull request comment under GitHub's 65,536
// characters with room to spare.
const MarkdownLimit = 60000

// RenderJSON writes the preview as indented JSON for tools.
func RenderJSON(w io.Writer, r *PreviewReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// RenderText writes the preview for a terminal.
func RenderText(w io.Writer, r *PreviewReport) error {
	var b strings.Builder
	if r.Base != "" || r.Head != "" {
		fmt.Fprintf(&b, "Comparing %s with %s.\n\n", r.Base, r.Head)
	}
	if r.BaseInvalid() {
		fmt.Fprintf(&b, "warning: %s\n  %s\n  %s:\n", baseWarning(r, plain), baseWarningDetail(r, plain), baseErrorsTitle(r))
		shown, more := baseErrorsShown(r)
		for _, e := range shown {
			fmt.Fprintf(&b, "    %s\n", e)
		}
		if more > 0 {
			fmt.Fprintf(&b, "    ...and %d more (-o json lists them all)\n", more)
		}
		b.WriteString("\n")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	if len(r.Errors) > 0 {
		b.WriteString("\n")
	}
	for i := range r.Rollouts {
		for _, w := range rolloutWarnings(&r.Rollouts[i], plain) {
			fmt.Fprintf(&b, "warning: %s\n\n", w)
		}
	}
	for i := range r.Rollouts {
		if n := rolloutNote(r, &r.Rollouts[i], plain); n != "" {
			fmt.Fprintf(&b, "%s\n\n", n)
		}
	}
	if !r.HasChanges() {
		fmt.Fprintf(&b, "%s\n\n", noChangesLine(r))
	} else {
		fmt.Fprintf(&b, "%s\n\n", summaryLine(r))
	}
	// Each range of clusters is written on its own goroutine (a class
	// change at 1,000 clusters is ~300 KB of text), then joined in order.
	parts := make([]strings.Builder, len(r.Clusters))
	inParallel(len(r.Clusters), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			parts[i].Grow(512) // a changed cluster's block is ~300 bytes
			writeClusterText(&parts[i], &r.Clusters[i])
		}
	})
	n := 0
	for i := range parts {
		n += parts[i].Len()
	}
	b.Grow(n + 4096)
	for i := range parts {
		b.WriteString(parts[i].String())
	}
	for _, u := range r.Untouched {
		fmt.Fprintf(&b, "= %s (unchanged)\n    why: %s\n", u.Name, u.Reason)
		writeTextDiff(&b, diffLines(u.Diff, u.Name))
		b.WriteString("\n")
	}
	if len(r.Untouched) > 0 || r.HasChanges() {
		b.WriteString(assumption(r) + "\n")
	}
	b.WriteString(mergeFooter(r) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeClusterText writes a changed cluster's block.
func writeClusterText(b *strings.Builder, c *ClusterChange) {
	b.WriteString(changeMark(c.Change) + " " + c.Name + " (" + c.Change + ")\n")
	for _, line := range clusterLines(c) {
		b.WriteString("    " + line + "\n")
	}
	writeTextDiff(b, diffLines(c.Diff, c.Name))
	b.WriteString("\n")
}

// writeTextDiff indents a cluster's field diff under a "diff:" line.
func writeTextDiff(b *strings.Builder, lines []string) {
	if len(lines) == 0 {
		return
	}
	b.WriteString("    diff:\n")
	for _, l := range lines {
		fmt.Fprintf(b, "      %s\n", l)
	}
}

// maxBaseErrors is how many of base's errors the text and the Markdown
// list when base does not validate; JSON has them all.
const maxBaseErrors = 10

// baseWarning says that base does not validate and what the preview
// compared head against instead; code formats a ref (Markdown quotes it).
func baseWarning(r *PreviewReport, code func(string) string) string {
	base := "base"
	if r.Base != "" {
		base += " " + code(r.Base)
	}
	if r.ComparedWith == CompareApplied {
		return fmt.Sprintf("%s does not validate, so head is compared with the revision the daemon runs: %s, the last it applied (the status branch).", base, code(shortCommit(r.Applied)))
	}
	against := "an empty fleet"
	if r.NotApplied != "" {
		against += " (" + r.NotApplied + ")"
	}
	return fmt.Sprintf("%s does not validate, so head is compared against %s: every cluster of head is listed as added, whether or not this change adds it.", base, against)
}

// baseWarningDetail says what the daemon runs when base does not validate,
// and how to see what merging changes; code formats a command.
func baseWarningDetail(r *PreviewReport, code func(string) string) string {
	if r.ComparedWith == CompareApplied {
		return "The daemon does not run base: it keeps " + code(shortCommit(r.Applied)) +
			" in force until a revision validates, and merging makes it apply head in place of that: what this plan shows."
	}
	return "The daemon does not run base: it keeps the last revision that validated (" + code("gitfleet describe") +
		": Last applied), and merging makes it apply head: plan with " + code("--base") + " set to that commit to see what that changes."
}

// shortCommit is a commit's first 7 digits, as Git shows it.
func shortCommit(c string) string { return c[:min(len(c), 7)] }

func baseErrorsTitle(r *PreviewReport) string {
	return "base's " + plural(len(r.BaseErrors), "error")
}

// baseErrorsShown are the base errors the text and the Markdown list, and
// how many more there are.
func baseErrorsShown(r *PreviewReport) ([]string, int) {
	if len(r.BaseErrors) <= maxBaseErrors {
		return r.BaseErrors, 0
	}
	return r.BaseErrors[:maxBaseErrors], len(r.BaseErrors) - maxBaseErrors
}

// mergeFooter says what merging head does.
func mergeFooter(r *PreviewReport) string {
	if r.ComparedWith == CompareApplied && len(r.Errors) > 0 {
		return "Merging as it is would be refused: the daemon keeps running " + shortCommit(r.Applied) + " (base does not validate either) and shows these errors in status (gitfleet describe, Last rejected)."
	}
	if r.ComparedWith == CompareEmpty {
		if len(r.Errors) > 0 {
			return "Merging as it is would be refused: the daemon keeps running the last revision that validated (base does not either) and shows these errors in status (gitfleet describe, Last rejected)."
		}
		return "Merging: the daemon applies head at its next poll or webhook in place of the last revision that validated, not of base: the clusters of that revision missing from head are deleted, and the others change where head differs from it. This plan, against an empty fleet, does not show which."
	}
	if len(r.Errors) > 0 {
		return "Merging as it is would be refused: the daemon keeps running base's revision and shows these errors in status (gitfleet describe, Last rejected)."
	}
	if !r.Reaches() {
		return "Merging changes no machine."
	}
	var b strings.Builder
	b.WriteString("Merging: the daemon applies head at its next poll or webhook")
	if r.ComparedWith == CompareApplied {
		b.WriteString(", in place of " + shortCommit(r.Applied))
	}
	b.WriteString(".")
	if !r.HasChanges() {
		b.WriteString(" No machine changes.")
	}
	type wave struct {
		name     string
		raw      string // as the class names it
		clusters []string
		rules    []string // new rules only, no machine
		paused   []string // passed over
	}
	classes := map[string]map[int]*wave{}
	waveOf := func(class, name string, index, waves int) *wave {
		ws := classes[class]
		if ws == nil {
			ws = map[int]*wave{}
			classes[class] = ws
		}
		w := ws[index]
		if w == nil {
			w = &wave{name: "wave " + name, raw: name}
			if index > waves {
				w.name = "the clusters no wave selects"
			}
			ws[index] = w
		}
		return w
	}
	var direct, resized []string
	waiting := map[string][]string{} // by class: held clusters nothing happens to now
	for i := range r.Clusters {
		c := &r.Clusters[i]
		now, later := false, c.Replaced > 0 || c.FromVersion != c.ToVersion
		for _, p := range c.Pools {
			now = now || p.ResizedAtOnce
			later = later || !p.ResizedAtOnce && p.FromReplicas != p.ToReplicas
		}
		if now {
			resized = append(resized, c.Name)
			if !later {
				continue // its wave has nothing left to do in it
			}
		}
		if c.Held != "" {
			if c.Replaced+c.Created+c.Deleted > 0 {
				direct = append(direct, c.Name) // its new sizes
			} else {
				waiting[c.Class] = append(waiting[c.Class], c.Name)
			}
			continue
		}
		if c.Refused != "" || c.Paused {
			continue // no step at all
		}
		if c.Admitted != "" {
			continue // the rollout under way's sentence names it
		}
		if c.Change == ChangeChanged && c.WaveIndex > 0 && !c.AtOnce {
			w := waveOf(c.Class, c.Wave, c.WaveIndex, c.Waves)
			w.clusters = append(w.clusters, c.Name)
			continue
		}
		direct = append(direct, c.Name)
	}
	var rulesAtOnce, network []string
	for _, u := range r.Untouched {
		if u.Network != "" {
			network = append(network, u.Name)
		}
		switch {
		case len(u.NewRules) > 0 && u.WaveIndex > 0:
			w := waveOf(u.Class, u.Wave, u.WaveIndex, u.Waves)
			w.rules = append(w.rules, u.Name)
		case len(u.NewRules) > 0:
			rulesAtOnce = append(rulesAtOnce, u.Name)
		}
	}
	for _, u := range r.Untouched {
		if p := r.rollout(u.Class); u.Paused && p != nil && p.NewRollout && classes[u.Class] != nil {
			w := waveOf(u.Class, u.Wave, u.WaveIndex, len(p.Waves))
			w.paused = append(w.paused, u.Name)
		}
	}
	for i := range r.Rollouts {
		p := &r.Rollouts[i]
		switch {
		case p.Releases() && p.NewRollout:
			fmt.Fprintf(&b, " Class %s's halted rollout of revision %s is released: the rollout of %s starts.", p.Class, p.Running.Revision, p.Revision)
		case p.Releases():
			fmt.Fprintf(&b, " Class %s's halted rollout of revision %s goes on under maxFailures %d.", p.Class, p.Running.Revision, p.MaxFailures)
		case p.halts():
			fmt.Fprintf(&b, " Class %s's rollout of revision %s halts under maxFailures %d until a fix or a revert of the class is merged.", p.Class, p.Running.Revision, p.MaxFailures)
		case p.Running != nil && p.Running.Halted && !p.NewRollout:
			fmt.Fprintf(&b, " Class %s's rollout stays halted at revision %s until a fix or a revert of the class is merged", p.Class, p.Running.Revision)
			if w := waiting[p.Class]; len(w) > 0 {
				b.WriteString("; until then " + agree(w, "waits on it", "wait on it"))
			}
			b.WriteString(".")
		case len(waiting[p.Class]) > 0:
			fmt.Fprintf(&b, " Waiting for their wave in class %s's rollout of revision %s: %s.", p.Class, p.Running.Revision, listNames(waiting[p.Class], 5))
		}
		if p.Running != nil && len(p.Admits)+len(p.Moves) > 0 {
			var what []string
			if len(p.Admits) > 0 {
				what = append(what, "it admits "+listNames(p.Admits, 5)+" at the merge")
			}
			if len(p.Moves) > 0 {
				what = append(what, agree(p.Moves, "waits where that gate puts it", "wait where that gate puts them"))
			}
			fmt.Fprintf(&b, " Class %s's rollout of revision %s under way goes on by the new gate: %s.", p.Class, p.Running.Revision, strings.Join(what, "; "))
		}
	}
	for _, class := range sortedKeys(classes) {
		ws := classes[class]
		idx := make([]int, 0, len(ws))
		for i := range ws {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		var parts []string
		for _, i := range idx {
			w := ws[i]
			var in []string
			if len(w.clusters) > 0 {
				in = append(in, listNames(w.clusters, 5))
			}
			if len(w.rules) > 0 {
				in = append(in, "new rules only: "+listNames(w.rules, 5))
			}
			if l := r.rollout(class).limit(w.raw); l != nil && len(in) > 0 {
				if l.Slots >= l.Clusters {
					in = append(in, fmt.Sprintf("maxConcurrent %s: all at once", l.MaxConcurrent))
				} else {
					in = append(in, fmt.Sprintf("maxConcurrent %s: %s at a time", l.MaxConcurrent, plural(l.Slots, "cluster")))
				}
			}
			switch {
			case len(w.paused) == 0:
				parts = append(parts, fmt.Sprintf("%s (%s)", w.name, strings.Join(in, "; ")))
			case len(in) == 0:
				parts = append(parts, fmt.Sprintf("%s (passed over: %s paused)", w.name, listNames(w.paused, 5)))
			default:
				parts = append(parts, fmt.Sprintf("%s (%s; %s paused, passed over)", w.name, strings.Join(in, "; "), listNames(w.paused, 5)))
			}
		}
		then := "; a wave starts when the one before it is done, and "
		if len(parts) == 1 {
			then = "; "
		}
		fmt.Fprintf(&b, " Class %s rolls out %s%s%s until a fix or a revert is merged.",
			class, strings.Join(parts, ", then "), then, haltsAfter(r.rollout(class)))
	}
	if len(direct) > 0 {
		fmt.Fprintf(&b, " At once, in no wave: %s.", listNames(direct, 5))
	}
	if len(resized) > 0 {
		fmt.Fprintf(&b, " New sizes at once, before their wave: %s.", listNames(resized, 5))
	}
	if len(rulesAtOnce) > 0 {
		fmt.Fprintf(&b, " New rules at once, in no wave, no machine changed: %s.", listNames(rulesAtOnce, 5))
	}
	if len(network) > 0 {
		fmt.Fprintf(&b, " New spec.clusterNetwork, which no running machine takes (only a control plane made again from none): %s.", listNames(network, 5))
	}
	return b.String()
}

// rolloutNote says what merging does to a class's rollout the status
// branch shows halted, or under way and holding a cluster the change
// edits ("" when there is nothing to say); code formats a revision.
func rolloutNote(r *PreviewReport, p *RolloutPlan, code func(string) string) string {
	run := p.Running
	if run == nil {
		return ""
	}
	started := ""
	if run.Change.Commit != "" {
		started = " (started by " + code(shortCommit(run.Change.Commit))
		if run.Change.Subject != "" {
			started += ": " + run.Change.Subject
		}
		started += ")"
	}
	what := fmt.Sprintf("Class %s's rollout of revision %s%s", p.Class, code(run.Revision), started)
	failed := fmt.Sprintf("%d of maxFailures %d clusters failed (%s)", len(run.Failed), run.MaxFailures, listNames(run.Failed, 5))
	switch {
	case p.halts():
		return fmt.Sprintf("%s is under way, %s. This change lowers maxFailures to %d, so merging halts it: no other cluster is admitted to that revision until a fix or a revert of the class is merged.",
			what, failed, p.MaxFailures)
	case run.Halted && !p.NewRollout && !p.haltsAt():
		return fmt.Sprintf("%s is halted: %s. This change raises maxFailures to %d, which releases the halt without a new rollout: that revision, the one that failed, goes on to the clusters it holds, wave by wave, and its failures still count.",
			what, failed, p.MaxFailures)
	}
	if !run.Halted {
		var held []string
		for i := range r.Clusters {
			if c := &r.Clusters[i]; c.Class == p.Class && c.Held != "" {
				held = append(held, c.Name)
			}
		}
		if p.NewRollout || len(held)+len(p.Admits)+len(p.Moves) == 0 {
			return ""
		}
		wave := ""
		if run.CurrentWave != "" {
			wave = ", at wave " + run.CurrentWave
		}
		var goes []string
		if len(held) > 0 {
			goes = append(goes, fmt.Sprintf("the clusters it has not admitted yet (%s) keep the templates they run until their wave admits them; only their new sizes apply at once", listNames(held, 5)))
		}
		if g := gateMoves(p); g != "" {
			goes = append(goes, g)
		}
		return fmt.Sprintf("%s is under way%s. This change leaves what the class's machines are made of as it is, so that rollout goes on, and %s.",
			what, wave, strings.Join(goes, "; and "))
	}
	halted := fmt.Sprintf("%s is halted: %s.", what, failed)
	if p.NewRollout {
		return halted + fmt.Sprintf(" This change changes what the class's machines are made of: merging starts a rollout of revision %s, which releases the halt: it starts again from the first wave with no failure counted%s.", code(p.Revision), failedFate(r, run.Failed))
	}
	var stays []string
	if len(p.Failed) > 0 {
		stays = append(stays, agree(p.Failed, "keeps its failed machines", "keep their failed machines"))
	}
	if len(p.Waiting) > 0 {
		stays = append(stays, agree(p.Waiting, "keeps the revision it runs", "keep the revisions they run"))
	}
	if len(p.New) > 0 {
		stays = append(stays, agree(p.New, ", new, waits", ", new, wait")+" with no machine, as would any cluster added to the class")
	} else {
		stays = append(stays, "a cluster added to the class waits with no machine")
	}
	return halted + " This change leaves what the class's machines are made of as it is, so the halt stays until a fix or a revert of the class is merged (or spec.rollout.maxFailures is raised): " +
		strings.Join(stays[:len(stays)-1], "; ") + "; and " + stays[len(stays)-1] + "."
}

// gateMoves says what the gate head sets does to the clusters of a
// rollout under way: which it admits at the merge, which wait elsewhere
// ("" when none).
func gateMoves(p *RolloutPlan) string {
	if len(p.Admits)+len(p.Moves) == 0 {
		return ""
	}
	by := "by the waves this change puts its clusters in"
	switch {
	case len(p.GateChanges) > 0 && p.GateBefore == p.Gate:
		by = "by the selectors this change gives its waves"
	case len(p.GateChanges) > 0:
		by = "by the gate this change sets (" + p.GateBefore + " → " + p.Gate + ")"
	}
	var what []string
	if len(p.Admits) > 0 {
		what = append(what, agree(p.Admits, "at the merge: its machines move", "at the merge: their machines move")+" to that revision now")
	}
	if len(p.Moves) > 0 {
		what = append(what, agree(p.Moves, "waits where that gate puts it, not where it waited", "wait where that gate puts them, not where they waited"))
	}
	if len(p.Admits) > 0 {
		return by + ", it admits " + strings.Join(what, "; ")
	}
	return by + ", " + what[0]
}

// failedFate says what becomes of the failed clusters' machines when the
// rollout a release starts admits them, as the preview counts it: a pool
// left with a machine over its replicas (the revert of the change its
// failed machine was made for) loses that machine and makes none in its
// place; the others are replaced.
func failedFate(r *PreviewReport, failed []string) string {
	var fates []string
	for _, f := range failed {
		var c *ClusterChange
		for i := range r.Clusters {
			if r.Clusters[i].Name == f {
				c = &r.Clusters[i]
			}
		}
		if c == nil || c.Held != "" || c.Refused != "" {
			continue
		}
		var what []string
		if c.Deleted > 0 {
			gone := plural(c.Deleted, "machine")
			if len(c.DeletedMachines) > 0 {
				gone = strings.Join(c.DeletedMachines, ", ")
			}
			what = append(what, fmt.Sprintf("loses %s, over its pools' replicas, with no replacement", gone))
		}
		if c.Replaced > 0 {
			what = append(what, "has "+plural(c.Replaced, "machine")+" replaced")
		}
		if len(what) > 0 {
			fates = append(fates, f+" "+strings.Join(what, ", and "))
		}
	}
	if len(fates) == 0 {
		return ""
	}
	return "; when their wave admits them, " + strings.Join(fates, "; ")
}

// haltsAfter says how many failed clusters halt a class's rollout.
func haltsAfter(p *RolloutPlan) string {
	n := 1
	if p != nil {
		n = max(p.MaxFailures, 1)
	}
	if n == 1 {
		return "the first cluster that fails halts the rollout (maxFailures 1)"
	}
	return fmt.Sprintf("the rollout halts once %d clusters failed (maxFailures %d)", n, n)
}

// rollout returns what merging does to class's rollout, or nil.
func (r *PreviewReport) rollout(class string) *RolloutPlan {
	for i := range r.Rollouts {
		if r.Rollouts[i].Class == class {
			return &r.Rollouts[i]
		}
	}
	return nil
}

// rolloutWarnings are what a reviewer should know of the rollout head
// starts: it changes the rollout's own gate, or passes a wave over whose
// every cluster is paused; code formats a revision.
func rolloutWarnings(p *RolloutPlan, code func(string) string) []string {
	var ws []string
	if w := gateWarning(p, code); w != "" {
		ws = append(ws, w)
	}
	for _, w := range p.PassedOver {
		first := "wave " + p.FirstWave
		if p.FirstWave == ImplicitWave {
			first = "the clusters no wave selects"
		}
		ws = append(ws, fmt.Sprintf("class %s: every cluster of wave %s is paused (%s): the rollout this change starts passes that wave over, as paused clusters take no part, so %s is the first it reaches; unpause one of them first to keep the wave",
			p.Class, w.Name, listNames(w.Clusters, 5), first))
	}
	return ws
}

// gateWarning says that head changes the gate of the rollout it starts
// ("" when it does not); code formats a revision.
func gateWarning(p *RolloutPlan, code func(string) string) string {
	if !p.NewRollout || len(p.GateChanges) == 0 {
		return ""
	}
	what := p.GateBefore + " → " + p.Gate
	if p.GateBefore == p.Gate {
		what = "the selectors of its waves"
	}
	return fmt.Sprintf("class %s: this change starts a rollout (revision %s) and changes the gate of that very rollout (%s): it runs by the new gate, not the one in force now, as a Deployment's new strategy governs the rollout its template change starts; change the gate in a commit of its own to roll this out under the gate in force",
		p.Class, code(p.Revision), what)
}

// agree names clusters (five at the most) followed by what they do, its
// verb agreeing with their number: one, or many.
func agree(names []string, one, many string) string {
	sep := " "
	if strings.HasPrefix(one, ",") {
		sep = ""
	}
	if len(names) == 1 {
		return names[0] + sep + one
	}
	return listNames(names, 5) + sep + many
}

// classChanged says whether a cluster changes because its class did.
func classChanged(c *ClusterChange) bool {
	for _, d := range c.Diff {
		if d.Object == "class "+c.Class {
			return true
		}
	}
	return false
}

// listNames joins names, the first n of them and a count of the rest.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

func changeMark(change string) string {
	switch change {
	case ChangeAdded:
		return "+"
	case ChangeRemoved:
		return "-"
	}
	return "~"
}

// noChangesLine sums up a preview that changes no cluster: "No changes"
// only when the change reaches none (Reaches), else which of them get new
// rules all the same, of their class or of their own files.
func noChangesLine(r *PreviewReport) string {
	if !r.Reaches() {
		return fmt.Sprintf("No changes: %s unchanged.", plural(r.Unchanged, "cluster"))
	}
	class, own, moved, network := 0, 0, 0, 0
	for _, u := range r.Untouched {
		switch {
		case len(u.NewRules) > 0 && u.Own:
			own++
		case len(u.NewRules) > 0:
			class++
		}
		if u.Gate != "" {
			moved++
		}
		if u.Network != "" {
			network++
		}
	}
	var rules []string
	if class > 0 {
		rules = append(rules, fmt.Sprintf(", %d of them getting new rules of their class in their wave", class))
	}
	if own > 0 {
		rules = append(rules, fmt.Sprintf(", %d of them getting new rules of their own files", own))
	}
	if moved > 0 {
		rules = append(rules, fmt.Sprintf(", %d of them waiting elsewhere in their class's rollout under way", moved))
	}
	if network > 0 {
		rules = append(rules, fmt.Sprintf(", %d of them getting a new clusterNetwork that no running machine takes", network))
	}
	return fmt.Sprintf("No machine changes: %s unchanged%s.", plural(r.Unchanged, "cluster"), strings.Join(rules, ""))
}

func summaryLine(r *PreviewReport) string {
	t := r.Totals
	what := "Plan"
	switch r.ComparedWith {
	case CompareApplied:
		what = "Plan against the last applied revision " + shortCommit(r.Applied) + " (base does not validate)"
	case CompareEmpty:
		what = "Plan against an empty fleet (base does not validate)"
	}
	return fmt.Sprintf("%s: %s added, %d changed, %d removed; %s replaced, %d created, %d deleted; %s unchanged.",
		what, plural(t.Added, "cluster"), t.Changed, t.Removed, plural(t.Replaced, "machine"), t.Created, t.Deleted, plural(r.Unchanged, "cluster"))
}

func assumption(r *PreviewReport) string {
	if r.Observed {
		return "Machines as observed on the status branch."
	}
	switch r.ComparedWith {
	case CompareApplied:
		return "No observed state: assumed every cluster runs exactly as " + shortCommit(r.Applied) + " describes."
	case CompareEmpty:
		return "No observed state, and base does not validate: assumed no machine runs."
	}
	return "No observed state: assumed every cluster runs exactly as base describes."
}

func versionText(c *ClusterChange) string {
	switch {
	case c.FromVersion == "" && c.ToVersion != "":
		return c.ToVersion
	case c.FromVersion == c.ToVersion:
		return c.ToVersion
	case c.Change == ChangeRemoved:
		return ""
	}
	s := c.FromVersion + " → " + c.ToVersion
	if len(c.Chain) > 0 {
		s += " via " + strings.Join(c.Chain, ", ")
	}
	if c.Held != "" {
		s += " (waits)"
	}
	return s
}

// waveText is a cluster's wave; for a change that goes at once, that it
// does, and the wave class changes reach it in (long: in a sentence; short:
// in a table cell).
func waveText(c *ClusterChange, long bool) string {
	if c.WaveIndex == 0 {
		return ""
	}
	w := fmt.Sprintf("%d/%d %s", c.WaveIndex, c.Waves, c.Wave)
	if c.WaveIndex > c.Waves {
		w = fmt.Sprintf("last, after wave %d (no wave selects it)", c.Waves)
	}
	switch {
	case !c.AtOnce:
		return w
	case long && c.RunsRevision != "":
		return "none, at once: it runs class revision " + c.RunsRevision + ", which this change brings back, so the rollout admits it at once (class changes reach it in " + w + ")"
	case long && c.Change == ChangeAdded:
		return "none, at once: a new cluster is made at once (class changes reach it in " + w + ")"
	case long:
		return "none, at once: the change is in the cluster's own files, and waves order class changes (which reach it in " + w + ")"
	}
	return "at once (" + w + ")"
}

func poolText(p PoolChange) string {
	s := p.Name + ": " + strconv.Itoa(p.FromReplicas) + " → " + plural(p.ToReplicas, "machine")
	if p.FromReplicas == p.ToReplicas {
		s = p.Name + ": " + plural(p.ToReplicas, "machine")
	}
	if p.ResizedAtOnce {
		s += " at once, from the templates it runs"
	}
	if p.Replaced > 0 {
		sep := ", "
		if p.ResizedAtOnce {
			sep = "; "
		}
		s += sep + strconv.Itoa(p.Replaced) + " replaced"
		if p.OnDelete {
			s += " when deleted (OnDelete)"
		}
		if p.ResizedAtOnce {
			s += " in its wave"
		}
	}
	if p.Held > 0 {
		s += ", " + strconv.Itoa(p.Held) + " to replace when the rollout admits the cluster"
	}
	if !p.RolloutAfter.IsZero() {
		s += " (made before rollout.after " + p.RolloutAfter.UTC().Format(time.RFC3339) + ", they go once it has passed)"
	}
	if p.Strategy != "" {
		s += "; new strategy " + p.Strategy
		if n := p.ToReplicas; n > 1 && strings.HasSuffix(p.Strategy, "maxUnavailable "+strconv.Itoa(n)) {
			s += ": every machine of the pool may be down at once"
		}
	}
	return s
}

// clusterLines are a cluster's details, one fact per line.
func clusterLines(c *ClusterChange) []string {
	var lines []string
	if c.Class != "" {
		lines = append(lines, "class: "+c.Class)
	}
	if v := versionText(c); v != "" {
		lines = append(lines, "version: "+v)
	}
	if w := waveText(c, true); w != "" {
		lines = append(lines, "wave: "+w)
	}
	if c.Paused {
		lines = append(lines, "paused: nothing happens until spec.paused is false")
	}
	if c.Refused != "" {
		lines = append(lines, "refused: "+c.Refused+"; no machine is created, replaced or deleted until it is fixed")
	}
	if c.Held != "" {
		lines = append(lines, "waits: "+c.Held)
	}
	if c.Admitted != "" {
		lines = append(lines, "admitted: "+c.Admitted)
	}
	if c.Network != "" {
		lines = append(lines, "network: "+c.Network)
	}
	for _, w := range c.Warnings {
		lines = append(lines, "warning: "+w)
	}
	if c.Change == ChangeRemoved {
		lines = append(lines, fmt.Sprintf("deletes %s: workers first, then the control plane", plural(c.Deleted, "machine")))
	}
	for _, p := range c.Pools {
		lines = append(lines, poolText(p))
	}
	if len(c.Machines) > 0 {
		verb := "replaced"
		if c.Change == ChangeRemoved {
			verb = "deleted"
		}
		lines = append(lines, fmt.Sprintf("machines %s: %s", verb, strings.Join(c.Machines, ", ")))
	}
	if len(c.DeletedMachines) > 0 {
		lines = append(lines, "machines deleted: "+strings.Join(c.DeletedMachines, ", "))
	}
	return lines
}

// RenderMarkdown writes the preview as a pull request comment: errors, a
// summary table, then each cluster's details folded, all within limit
// characters (MarkdownLimit when limit <= 0); what does not fit is cut and a
// note says how much.
func RenderMarkdown(w io.Writer, r *PreviewReport, limit int) error {
	if limit <= 0 {
		limit = MarkdownLimit
	}
	const reserve = 400 // for the note of what was cut
	var b strings.Builder
	title := "### gitfleet plan"
	if r.Base != "" || r.Head != "" {
		title += fmt.Sprintf(": `%s` → `%s`", r.Base, r.Head)
	}
	b.WriteString(title + "\n\n")
	cutErrors, cutRows, cutDetails := 0, 0, 0
	if r.BaseInvalid() {
		// First, before anything that reads as what the change does.
		fmt.Fprintf(&b, "> [!WARNING]\n> **%s**\n>\n> %s\n>\n> %s:\n>\n",
			upperFirst(baseWarning(r, quoted)), baseWarningDetail(r, quoted), upperFirst(baseErrorsTitle(r)))
		shown, more := baseErrorsShown(r)
		for _, e := range shown {
			fmt.Fprintf(&b, "> - `%s`\n", strings.ReplaceAll(e, "`", "'"))
		}
		if more > 0 {
			fmt.Fprintf(&b, "> - ...and %d more (`gitfleet plan --format json` lists them all)\n", more)
		}
		b.WriteString("\n")
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "**%d errors** — merging this would be rejected:\n\n", len(r.Errors))
		for i, e := range r.Errors {
			line := "- `" + strings.ReplaceAll(e, "`", "'") + "`\n"
			if b.Len()+len(line) > limit/4 {
				cutErrors = len(r.Errors) - i
				break
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	if ws := warnings(r); len(ws) > 0 {
		fmt.Fprintf(&b, "**%s**:\n\n", plural(len(ws), "warning"))
		for i, w := range ws {
			line := "- " + w + "\n"
			if b.Len()+len(line) > limit/3 {
				cutErrors += len(ws) - i
				break
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	for i := range r.Rollouts {
		p := &r.Rollouts[i]
		n := rolloutNote(r, p, quoted)
		if n == "" {
			continue
		}
		if p.Running != nil && p.Running.Halted {
			// GitHub and GitLab show it as a box; other renderers as a quote.
			n = "> [!CAUTION]\n> " + n
		}
		fmt.Fprintf(&b, "%s\n\n", n)
	}
	if !r.HasChanges() {
		fmt.Fprintf(&b, "%s\n\n", noChangesLine(r))
	} else {
		fmt.Fprintf(&b, "%s\n\n", summaryLine(r))
		b.WriteString("| | cluster | class | version | wave | machines replaced | created | deleted |\n|---|---|---|---|---|---:|---:|---:|\n")
		for i := range r.Clusters {
			c := &r.Clusters[i]
			row := fmt.Sprintf("| %s | `%s` | %s | %s | %s | %d | %d | %d |\n", changeMark(c.Change), c.Name, c.Class,
				versionText(c), waveText(c, false), c.Replaced, c.Created, c.Deleted)
			if b.Len()+len(row) > limit*2/3-reserve {
				cutRows = len(r.Clusters) - i
				break
			}
			b.WriteString(row)
		}
		b.WriteString("\n<details><summary>Details per cluster</summary>\n\n")
		shown := len(r.Clusters) - cutRows
		for i := range r.Clusters[:shown] {
			c := &r.Clusters[i]
			var d strings.Builder
			fmt.Fprintf(&d, "**%s** (%s)\n", c.Name, c.Change)
			for _, line := range clusterLines(c) {
				fmt.Fprintf(&d, "- %s\n", line)
			}
			d.WriteString("\n")
			writeMarkdownDiff(&d, diffLines(c.Diff, c.Name))
			if b.Len()+d.Len() > limit-reserve {
				cutDetails = shown - i
				break
			}
			b.WriteString(d.String())
		}
		b.WriteString("</details>\n\n")
	}
	if len(r.Untouched) > 0 {
		fmt.Fprintf(&b, "**Unchanged although the change edits them** (%d):\n\n", len(r.Untouched))
		for i, u := range r.Untouched {
			line := fmt.Sprintf("- `%s`: %s\n", u.Name, u.Reason)
			if b.Len()+len(line) > limit-reserve {
				cutDetails += len(r.Untouched) - i
				break
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	if cutErrors+cutRows+cutDetails > 0 {
		fmt.Fprintf(&b, "> **Cut to stay under %d characters:** %d errors or warnings, %d table rows and %d cluster details not shown. Run `gitfleet plan --format json` for everything.\n\n",
			limit, cutErrors, cutRows, cutDetails)
	}
	b.WriteString("_" + assumption(r) + "_\n\n")
	b.WriteString(mergeFooter(r) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMarkdownDiff adds a ```diff block of a cluster's field changes.
func writeMarkdownDiff(b *strings.Builder, lines []string) {
	if len(lines) == 0 {
		return
	}
	b.WriteString("```diff\n")
	for _, l := range lines {
		b.WriteString(strings.ReplaceAll(l, "```", "'''") + "\n")
	}
	b.WriteString("```\n\n")
}

// plain and quoted format a ref or a command in text and in Markdown.
func plain(s string) string  { return s }
func quoted(s string) string { return "`" + s + "`" }

// upperFirst capitalizes s's first letter (ASCII).
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// warnings are every class's rollout warnings, then every cluster's,
// each prefixed with its cluster.
func warnings(r *PreviewReport) []string {
	var ws []string
	for i := range r.Rollouts {
		for _, w := range rolloutWarnings(&r.Rollouts[i], quoted) {
			ws = append(ws, upperFirst(w))
		}
	}
	for i := range r.Clusters {
		for _, w := range r.Clusters[i].Warnings {
			ws = append(ws, "`"+r.Clusters[i].Name+"`: "+w)
		}
	}
	return ws
}
