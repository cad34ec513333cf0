package sources

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TODO(schemas): replace with schemas.ParseFile and schemas.Check once the
// schemas package implements them; until then only YAML syntax is checked.
var (
	parseFile  = yamlOnlyParse
	checkFleet = func(objs []schemas.Object, _ []schemas.File) (*v1alpha1.Fleet, schemas.Errors) {
		return &v1alpha1.Fleet{}, nil
	}
)

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlOnlyParse(f schemas.File) ([]schemas.Object, schemas.Errors) {
	dec := yaml.NewDecoder(bytes.NewReader(f.Data))
	var objs []schemas.Object
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			e := schemas.Error{Path: f.Path, Message: err.Error()}
			if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
				e.Message = m[2]
			}
			return objs, schemas.Errors{e}
		}
		var meta struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		_ = n.Decode(&meta)
		objs = append(objs, schemas.Object{Kind: meta.Kind, Name: meta.Metadata.Name, Source: v1alpha1.Source{Path: f.Path, Line: n.Line}})
	}
}
