package schemas

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ReadDir reads the YAML and CUE files of a fleet repository's working tree,
// skipping .git and other hidden folders. Paths are slash-separated and
// relative to dir. Load decides which of them are fleet documents.
func ReadDir(dir string) ([]File, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("read fleet: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("read fleet: %s is not a directory", dir)
	}
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !IsYAMLFile(d.Name()) && path.Ext(d.Name()) != ".cue" {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fleet: %w", err)
	}
	return files, nil
}
