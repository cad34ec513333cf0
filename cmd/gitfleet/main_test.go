package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain gives the tests a validation cache of their own instead of the
// user's, shared by every test, as one user's runs share theirs.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gitfleet-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("GITFLEET_CACHE", filepath.Join(dir, "validation"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
