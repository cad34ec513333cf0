package capi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas/patch"
)

// doc is one YAML document of the input: its plain value, and its node,
// to say on which line a field is written.
type doc struct {
	file       string
	node       *yaml.Node // the document's mapping
	m          map[string]any
	apiVersion string
	kind       string
	name       string
	namespace  string
}

// readDocs splits a file into its mapping documents; others (empty
// documents, lists, scalars) are skipped, and YAML errors returned.
func readDocs(file string, data []byte) ([]*doc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*doc
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not valid YAML: %v", file, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
			continue
		}
		var m map[string]any
		if err := n.Content[0].Decode(&m); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", file, n.Content[0].Line, err)
		}
		d := &doc{file: file, node: n.Content[0], m: m}
		d.apiVersion = str(m, "apiVersion")
		d.kind = str(m, "kind")
		d.name = str(m, "metadata", "name")
		d.namespace = str(m, "metadata", "namespace")
		out = append(out, d)
	}
}

// line is the line a field is written on (path of keys and list
// indexes), or the nearest enclosing field's.
func (d *doc) line(path ...string) int {
	n := d.node
	line := n.Line
	for _, k := range path {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(k); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// get reads a value at a path of keys and list indexes; nil when absent.
func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, k := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func str(m map[string]any, path ...string) string {
	s, _ := get(m, path...).(string)
	return s
}

func obj(m map[string]any, path ...string) map[string]any {
	o, _ := get(m, path...).(map[string]any)
	return o
}

func list(m map[string]any, path ...string) []any {
	l, _ := get(m, path...).([]any)
	return l
}

// fieldPath writes a path as the report shows it: spec.topology.workers.machineDeployments[0].class.
func fieldPath(path ...string) string { return patch.Pointer(path).Dotted() }

// seconds reads a Cluster API v1beta1 duration ("10m", "300s") or a
// v1beta2 number of seconds.
func seconds(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case string:
		var total float64
		rest := x
		for rest != "" {
			i := 0
			for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
				i++
			}
			j := i
			for j < len(rest) && (rest[j] < '0' || rest[j] > '9') && rest[j] != '.' {
				j++
			}
			n, err := strconv.ParseFloat(rest[:i], 64)
			if err != nil {
				return 0, false
			}
			switch rest[i:j] {
			case "h":
				total += n * 3600
			case "m":
				total += n * 60
			case "s":
				total += n
			case "ms":
				total += n / 1000
			default:
				return 0, false
			}
			rest = rest[j:]
		}
		return int(total), true
	}
	return 0, false
}
