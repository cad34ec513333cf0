// Package doccheck holds checks over the repository's text: docs and
// comments must stand alone.
package doccheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pathLike is a token that names a file of this repository: a path under
// one of its top-level folders, or a Markdown file named in capitals
// (README.md).
var pathLike = regexp.MustCompile("(?:^|[\\s(`\"'\\[])((?:\\.ci|cmd|deploy|docs|fixtures|internal|planner|providers|reconciler|schemas|sources)/[A-Za-z0-9_./-]+|[A-Z][A-Z0-9_-]+\\.md)")

// mdLink is the target of a relative Markdown link.
var mdLink = regexp.MustCompile(`\]\(([^)#:\s]+)(?:#[^)]*)?\)`)

// TestDocsNameOnlyFilesThatExist fails when a Markdown file or a Go
// comment names a file path that is not in the repository: the project
// must stand alone, and a reader who follows a path must find it.
func TestDocsNameOnlyFilesThatExist(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") && name != ".ci" || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		isMD, isGo := strings.HasSuffix(name, ".md"), strings.HasSuffix(name, ".go")
		if !isMD && !isGo {
			return nil
		}
		checked++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, path)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if isGo {
				i := strings.Index(line, "//")
				if i < 0 {
					continue
				}
				line = line[i+2:]
			}
			for _, m := range pathLike.FindAllStringSubmatch(line, -1) {
				p := strings.TrimRight(m[1], ".,:;")
				if !exists(root, "", p) {
					t.Errorf("%s:%d names %s, which is not in the repository", rel, n, p)
				}
			}
			if isMD {
				for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
					if !exists(root, filepath.Dir(path), m[1]) {
						t.Errorf("%s:%d links to %s, which is not in the repository", rel, n, m[1])
					}
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d files checked: the walk missed the repository", checked)
	}
}

// exists reports whether p names a file or folder, from the repository's
// root or from dir. Patterns (<name>, *, {a,b}) are not checked.
func exists(root, dir, p string) bool {
	if strings.ContainsAny(p, "<>*{}$") {
		return true
	}
	// A Go identifier after its package's folder: internal/secret.RedactURL.
	if i := strings.LastIndex(p, "."); i > strings.LastIndex(p, "/") && i+1 < len(p) && p[i+1] >= 'A' && p[i+1] <= 'Z' {
		if exists(root, dir, p[:i]) {
			return true
		}
	}
	for _, base := range []string{root, dir} {
		if base == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(base, p)); err == nil {
			return true
		}
	}
	return false
}
