package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain gives the tests a validation cache of their own instead of the
// user's, shared by every test, as one user's runs share theirs. With
// $GITFLEET_TEST_AS_MAIN set the test binary is gitfleet itself, for tests
// that run it from a shell (asMain).
func TestMain(m *testing.M) {
	if os.Getenv("GITFLEET_TEST_AS_MAIN") != "" {
		main()
	}
	dir, err := os.MkdirTemp("", "gitfleet-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("GITFLEET_CACHE", filepath.Join(dir, "validation"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// asMain returns a folder holding a `gitfleet` that is this test binary
// run as gitfleet's main, for a shell's PATH.
func asMain(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nGITFLEET_TEST_AS_MAIN=1 exec '" + self + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "gitfleet"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
