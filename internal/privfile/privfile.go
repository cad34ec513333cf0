// Package privfile writes files only their owner can read, whole or not
// at all: the validation cache and its decoded objects, the status
// summaries, NATS credentials, the embedded server's port; and makes
// files that must never be replaced (the secrets key, the API token).
package privfile

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data through a temporary file in the same
// folder (created with mode 0600) and a rename, so a reader never sees
// half of it; on failure the temporary file is removed and path is as it
// was.
func Write(path string, data []byte) error {
	return WriteFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write of what write writes, buffered: a large file need not
// be built in memory first.
func WriteFunc(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tmp, 64<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// link is os.Link; a test replaces it to play a file system without hard
// links.
var link = os.Link

// Create writes data to path whole, as Write does, but only if nothing is
// at path: the file is linked into place, never renamed over another, so
// of two processes that create it at once one wins and the other gets an
// error that is fs.ErrExist, and a reader sees all of it or no file (on a
// file system without hard links it is created in place, exclusively).
func Create(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync() // a crash leaves the whole file or none
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	err = link(tmp.Name(), path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	// A file system without hard links: create in place, still never
	// over another file (a reader may then meet it before it is whole).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
