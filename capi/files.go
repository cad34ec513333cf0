package capi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ReadInputs reads the files named, and the .yaml and .yml files under
// the folders named, in name order.
func ReadInputs(paths []string) ([]Input, error) {
	var out []Input
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, Input{Path: filepath.ToSlash(p), Data: data})
			continue
		}
		var files []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, Input{Path: filepath.ToSlash(f), Data: data})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no YAML file to convert")
	}
	return out, nil
}

// Write writes the result's files under dir, creating folders; it
// overwrites no file: one that exists already is an error, and nothing is
// written.
func Write(dir string, res *Result) ([]string, error) {
	var names []string
	for name := range res.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil, fmt.Errorf("%s exists already: remove it, or convert into another folder with -o", filepath.Join(dir, name))
		}
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, res.Files[name], 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}
