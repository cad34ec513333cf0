package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gitfleet/gitfleet/fixtures"
)

// whole measures the whole-process rows.
type whole struct {
	gitfleet, cue, tofu, schemas string
	dir                          string // generated fleets and caches
	runs                         int
	procs                        Procs
}

// The generated clusters' folder inside a fleet, and the class bump.
const (
	genDir      = "clusters/gen"
	classFile   = "classes/standard.yaml"
	classFrom   = "\n  version: v1.31.2\n"
	classTo     = "\n  version: v1.32.0\n"
	bumpBranch  = "bump"
	cueSchema   = "#Checked"
	checkedCUE  = "package fleet\n\n// What cue vet checks a cluster file against: the built-in schema and the\n// fleet's policy, as gitfleet validate does.\n#Checked: #Cluster & Cluster\n"
	policyFile  = "policies/prod.cue"
	cueSchemaIn = "cue-schema"
)

// measure generates a fleet of n clusters and measures validate, plan and
// cue vet on it.
func (w *whole) measure(n int) error {
	fleet := filepath.Join(w.dir, fmt.Sprintf("fleet-%d", n))
	progress("generating a fleet of %d clusters in %s", n, fleet)
	if err := w.generate(fleet, n); err != nil {
		return err
	}
	schema, err := w.cueSchema(fleet)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(fleet, genDir, "*.yaml"))
	if err != nil {
		return err
	}
	for i := range files {
		files[i], _ = filepath.Rel(fleet, files[i])
	}
	cueArgs := append([]string{"vet", "-c=false", "-d", cueSchema}, schema...)
	cueArgs = append(cueArgs, files...)
	cmds := []struct {
		name string
		bin  string
		args []string
		exit int // the exit status that means it worked
	}{
		{cmdValidate, w.gitfleet, []string{"validate", "."}, 0},
		{cmdPlan, w.gitfleet, []string{"plan", "--repo", ".", "--base", "main", "--head", bumpBranch, "--detailed-exitcode"}, 2},
	}
	for _, c := range cmds {
		var cold, warm []sample
		for r := range w.runs {
			cache, err := os.MkdirTemp(w.dir, "cache-")
			if err != nil {
				return err
			}
			for _, list := range []*[]sample{&cold, &warm} {
				*list = append(*list, runOnce(fleet, cacheEnv(cache), c.exit, c.bin, c.args...))
			}
			progress("%d clusters, %s run %d: cold %s, warm %s", n, c.name, r+1, cold[r], warm[r])
			if err := os.RemoveAll(cache); err != nil {
				return err
			}
		}
		w.procs[ProcKey{c.name, n, cacheCold}] = summarize(cold)
		w.procs[ProcKey{c.name, n, cacheWarm}] = summarize(warm)
	}
	if n == tofuSize {
		// What fails here fails the row, not the table.
		changed, replaced, err := planTotals(w.gitfleet, fleet)
		if err == nil {
			err = w.measureTofu(n, changed, replaced)
		}
		if err != nil {
			progress("%d clusters, OpenTofu's plan: %v", n, err)
			w.procs[ProcKey{cmdTofu, n, ""}] = Proc{Err: err.Error()}
		}
	}
	if _, err := os.Stat(w.cue); err != nil {
		progress("no cue binary at %s (make bin/cue): cue vet not run", w.cue)
		return nil
	}
	var cue []sample
	for r := range w.runs {
		cue = append(cue, runOnce(fleet, cacheEnv(filepath.Join(w.dir, "cue-cache")), 0, w.cue, cueArgs...))
		progress("%d clusters, cue vet run %d: %s", n, r+1, cue[r])
	}
	w.procs[ProcKey{cmdCue, n, ""}] = summarize(cue)
	return nil
}

// generate writes a fleet repository: gitfleet init's example fleet (a
// class, two clusters, a health check, a policy) and n generated clusters
// of the class on branch main, and on branch bump the class's version one
// minor up; packed by git gc, as a clone is.
func (w *whole) generate(dir string, n int) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if out, err := exec.Command(w.gitfleet, "init", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("gitfleet init: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, genDir), 0o755); err != nil {
		return err
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, genDir, fmt.Sprintf("c-%05d.yaml", i)), fixtures.GeneratedCluster(i, ""), 0o644); err != nil {
			return err
		}
	}
	if err := git(dir, "add", "-A"); err != nil {
		return err
	}
	if err := git(dir, "commit", "-q", "-m", fmt.Sprintf("%d generated clusters", n)); err != nil {
		return err
	}
	if err := git(dir, "checkout", "-q", "-b", bumpBranch); err != nil {
		return err
	}
	class, err := os.ReadFile(filepath.Join(dir, classFile))
	if err != nil {
		return err
	}
	if !bytes.Contains(class, []byte(classFrom)) {
		return fmt.Errorf("%s of gitfleet init has no %q to bump", classFile, strings.TrimSpace(classFrom))
	}
	class = bytes.Replace(class, []byte(classFrom), []byte(classTo), 1)
	if err := os.WriteFile(filepath.Join(dir, classFile), class, 0o644); err != nil {
		return err
	}
	if err := git(dir, "commit", "-q", "-a", "-m", "standard: "+strings.TrimSpace(classTo)); err != nil {
		return err
	}
	if err := git(dir, "checkout", "-q", "main"); err != nil {
		return err
	}
	return git(dir, "gc", "-q")
}

// cueSchema writes, next to the fleet, the CUE that cue vet checks its
// cluster files against: gitfleet's schema files, the fleet's policy in the
// schema's package, and #Checked, their conjunction for a Cluster. It
// returns the files' paths.
func (w *whole) cueSchema(fleet string) ([]string, error) {
	dir := filepath.Join(w.dir, cueSchemaIn)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, pattern := range []struct{ glob, prefix string }{{"*.cue", ""}, {"providers/*.cue", "providers-"}} {
		m, err := filepath.Glob(filepath.Join(w.schemas, pattern.glob))
		if err != nil {
			return nil, err
		}
		for _, src := range m {
			data, err := os.ReadFile(src)
			if err != nil {
				return nil, err
			}
			dst := filepath.Join(dir, pattern.prefix+filepath.Base(src))
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return nil, err
			}
			files = append(files, dst)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .cue files in %s (-schemas)", w.schemas)
	}
	policy, err := os.ReadFile(filepath.Join(fleet, policyFile))
	if err != nil {
		return nil, err
	}
	extra := map[string]string{"policy.cue": "package fleet\n\n" + string(policy), "checked.cue": checkedCUE}
	for _, name := range []string{"policy.cue", "checked.cue"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(extra[name]), 0o644); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	return files, nil
}

// git runs the git CLI in dir with a fixed identity and no automatic gc
// (detached, it would run during the measurements).
func git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "gc.auto=0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// sample is one run of a process.
type sample struct {
	wall   time.Duration
	maxRSS int64 // KiB
	err    string
}

func (s sample) String() string {
	if s.err != "" {
		return "failed: " + s.err
	}
	return fmt.Sprintf("%s, %d MiB", s.wall.Round(time.Millisecond), s.maxRSS>>10)
}

// cacheEnv sets the user's cache directory to cache (gitfleet keeps its
// validation cache there).
func cacheEnv(cache string) []string { return []string{"XDG_CACHE_HOME=" + cache} }

// runOnce runs bin in dir with extra in its environment and no
// GITFLEET_CACHE, and returns its wall time and peak RSS; it failed unless
// it exited with status exit.
func runOnce(dir string, extra []string, exit int, bin string, args ...string) sample {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "XDG_CACHE_HOME=") || strings.HasPrefix(kv, "GITFLEET_CACHE=")
	})
	cmd.Env = append(env, extra...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	s := sample{wall: time.Since(start)}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			s.maxRSS = int64(ru.Maxrss) // KiB on Linux
		}
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == exit:
	case err != nil:
		s.err = fmt.Sprintf("%s: %v: %s", filepath.Base(bin), err, lastLine(stderr.String()))
	case exit != 0:
		s.err = fmt.Sprintf("%s exited 0, not %d", filepath.Base(bin), exit)
	}
	return s
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// summarize keeps the median wall time and the largest peak RSS of the
// runs; one failed run fails the figure.
func summarize(ss []sample) Proc {
	walls := make([]time.Duration, 0, len(ss))
	var p Proc
	for _, s := range ss {
		if s.err != "" {
			return Proc{Err: s.err}
		}
		walls = append(walls, s.wall)
		p.MaxRSS = max(p.MaxRSS, s.maxRSS)
	}
	slices.Sort(walls)
	p.Wall = walls[len(walls)/2]
	return p
}
