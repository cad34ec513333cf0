package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/fixtures"
	"gopkg.in/yaml.v3"
)

// yamlRoots is what yaml.v3 reads as splitYAML sees it: each document's
// root, but for empty documents (no content, or a null).
func yamlRoots(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var roots []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return roots, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) > 0 && !isNull(n.Content[0]) {
			roots = append(roots, n.Content[0])
		}
	}
}

// sameNodes says where two node trees differ, comments aside.
func sameNodes(a, b *yaml.Node, at string) error {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || a.Style != b.Style || a.Line != b.Line || a.Column != b.Column {
		return fmt.Errorf("%s: fast {kind %d tag %s value %q style %d at %d:%d}, yaml.v3 {kind %d tag %s value %q style %d at %d:%d}",
			at, a.Kind, a.Tag, a.Value, a.Style, a.Line, a.Column, b.Kind, b.Tag, b.Value, b.Style, b.Line, b.Column)
	}
	if len(a.Content) != len(b.Content) {
		return fmt.Errorf("%s: fast has %d children, yaml.v3 %d", at, len(a.Content), len(b.Content))
	}
	for i := range a.Content {
		if err := sameNodes(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", at, i)); err != nil {
			return err
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func checkFast(t *testing.T, data []byte) (accepted bool) {
	t.Helper()
	all, ok := fastYAML(data)
	if !ok {
		return false
	}
	var fast []*yaml.Node
	for _, r := range all {
		if !isNull(r) {
			fast = append(fast, r)
		}
	}
	want, err := yamlRoots(data)
	if err != nil {
		t.Fatalf("fastYAML read what yaml.v3 refuses (%v):\n%s", err, data)
	}
	if len(fast) != len(want) {
		t.Fatalf("fastYAML read %d documents, yaml.v3 %d:\n%s", len(fast), len(want), data)
	}
	for i := range fast {
		if err := sameNodes(fast[i], want[i], fmt.Sprintf("document %d", i)); err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
	}
	return true
}

// fleetYAML is every YAML file of the repository's fixtures and docs
// examples: what fleet files look like.
func fleetYAML(t testing.TB) map[string][]byte {
	files := map[string][]byte{}
	root := filepath.Join("..", "fixtures")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		files[path] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var fastCases = []string{
	"a: 1\nb: [x, 'y', \"z\"]\nc: {d: e, f: [1, 2]}\n",
	"# head\n---\nkind: Cluster\n---\n# empty\n---\nkind: Other # trailing\n",
	"list:\n- a\n- b: 1\n  c: 2\n-\n  d: 3\nnext: true\n",
	"a:\n  b:\n    - c: 'it''s'\n      d: ~\n  e: 1.5\n",
	"url: http://example.com:8080/x\nname: a#b\nneg: -1\nver: v1.31.2\n",
	"key : value\n'quoted key': 1\n\"dq\": 2\n",
	"ünï: cödé\nx: [é, ü]\n",
	"- - a\n  - b\n- c\n",
	"a: [ ]\nb: {}\n",
	"on: yes\noff: no\ny: n\nnull: null\nt: 2001-12-14\n",
	"a: |\n  block\n",
	"a: &x 1\nb: *x\n",
	"a: b\n  c\n",
	"a:\nb: 1\n",
	"a: \"esc\\n\"\n",
	"\ta: 1\n",
	"a: 1\r\n",
	"[a, b, ]\n",
	"- a\n b\n",
	"a: 1\n- b\n",
	"...\n",
	"%YAML 1.2\n---\na: 1\n",
	"a: b: c\n",
	"a: 'unterminated\n",
	"<<: {a: 1}\n",
	"? a\n: b\n",
	"a: -\n",
	"a: - b\n",
	"a: [b\n",
	"  a: 1\n  b: 2\n",
	"  a: 1\nb: 2\n",
	"a: 1 # c\n  # indented comment\nb: 2\n",
	"a:\n  # comment first\n  b: 1\n",
	"a:\n\n  b: 1\n",
	"--- # comment\na: 1\n",
	"---\n---\n",
	"a: {b: c: d}\n",
	"a: {b: [c, {d: e}]}\n",
	"\xef\xbb\xbfa: 1\n",
	"a: 1\n...\n",
	"a: \"\"\nb: ''\n",
	"a: x\u0085y\n",
	"a: x\u2028y\n",
	"a: x\ufeffy\n",
	"a: \"x\u2029y\"\n",
	"a: x\u00a0y\n",
	// Plain scalars whose tag is not a string's, and their near misses.
	"a: [true, True, TRUE, tRUE, truex, t]\nb: [false, False, FALSE, fALSE, f, fa]\n",
	"c: [null, Null, NULL, nULL, nil, n, No, NO, no, yes, Yes, on, On, off, y, ~]\n",
	"d: [Tru, F, N, O, Y, ten, nodes, Ön, .5, .inf, -.inf, +1, 0x1F, 0o17, 1_000, 1e3]\ne: 12:30\n",
}

// TestFleetAPIQuotesTheFastYAMLCount: docs/fleet-api.md says how many of
// the fixture files the fast YAML parser reads; the figure is the count.
// Before, it said 46 of 47 when it read 60 of 67.
func TestFleetAPIQuotesTheFastYAMLCount(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "fleet-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	read, files := 0, fleetYAML(t)
	for _, data := range files {
		if _, ok := fastYAML(data); ok {
			read++
		}
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	want := fmt.Sprintf("it reads %d of the %d fixture files", read, len(files))
	if !strings.Contains(text, want) {
		t.Errorf("docs/fleet-api.md does not say %q", want)
	}
}

// On the fixtures and the cases above, fastYAML either reads what yaml.v3
// reads, node for node, or declines; and it does read the fleet files.
func TestFastYAMLReadsAsYAMLv3(t *testing.T) {
	read := 0
	files := fleetYAML(t)
	for path, data := range files {
		t.Run(path, func(t *testing.T) {
			if checkFast(t, data) {
				read++
			}
		})
	}
	if read < len(files)/2 {
		t.Errorf("fastYAML read %d of %d fixture files: it should read most fleet files", read, len(files))
	}
	for _, c := range fastCases {
		checkFast(t, []byte(c))
	}
	plain := fastCases[len(fastCases)-3:] // the plain scalars' tags, above
	for _, c := range append([]string{fastCases[0], fastCases[2], fastCases[3], fastCases[4], fastCases[5], fastCases[6], string(fixtures.GeneratedCluster(7, "v1.31.2"))}, plain...) {
		if _, ok := fastYAML([]byte(c)); !ok {
			t.Errorf("fastYAML declined a plain fleet file:\n%s", c)
		}
	}
}

func FuzzFastYAML(f *testing.F) {
	for _, data := range fleetYAML(f) {
		f.Add(data)
	}
	for _, c := range fastCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFast(t, data)
	})
}
