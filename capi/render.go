package capi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// render writes objects as one multi-document YAML file in block style,
// fields in the order of the fleet API's types, under a comment naming
// the files they were converted from.
func render(objs []any, from []string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Converted from Cluster API by gitfleet import capi (from %s).\n", strings.Join(from, ", "))
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		js, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		var n yaml.Node
		if err := yaml.Unmarshal(js, &n); err != nil {
			return nil, err
		}
		block(&n)
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(&n); err != nil {
			return nil, err
		}
		if err := enc.Close(); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// block turns JSON's flow style and quoting into YAML's block style and
// plain scalars (the encoder quotes a string that would read as another
// type).
func block(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		block(c)
	}
}
