// Package private keeps the files that hold what runs did (histories,
// arguments, results, approvals) readable by their owner only: directories
// 0700, files 0600; and reads secret files (keys, tokens) only when they are
// kept so.
package private

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// Dir creates the directory at path (and its missing parents) 0700.
func Dir(path string) error {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// sqliteSuffixes name a database file and the files SQLite keeps beside it.
var sqliteSuffixes = []string{"", "-journal", "-wal", "-shm"}

// SQLite prepares the SQLite database file at path: created empty 0600 if it
// is missing (SQLite would create it 0644, and gives the -journal, -wal and
// -shm files the database file's mode), and, with the files beside it, made
// private if an older toolgate left it readable by others.
func SQLite(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	for _, suffix := range sqliteSuffixes {
		if err := Restrict(path + suffix); err != nil {
			return err
		}
	}
	return nil
}

// Restrict takes every permission of group and others from the file at path,
// if there is one.
func Restrict(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(path, perm&^0o077); err != nil {
			return fmt.Errorf("making %s private: %w", path, err)
		}
	}
	return nil
}

// ReadFile reads a secret file of at most max bytes: a regular file (not a
// symlink, which could point it elsewhere after the check) that, on systems
// with Unix permissions, neither group nor others may read or write. The
// file read is the one checked. Errors name the file and say what to change;
// a missing file's error wraps fs.ErrNotExist.
func ReadFile(path string, max int) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (mode %s); a symlink or device is refused, point at the file itself", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); unixModes && perm&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets group or others at it; run `chmod 600 %s`", path, perm, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, ofi) {
		return nil, fmt.Errorf("%s: changed while being opened; try again", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("%s: over %d bytes", path, max)
	}
	return data, nil
}

// unixModes says whether files have Unix permission bits to check.
const unixModes = runtime.GOOS != "windows" && runtime.GOOS != "plan9"

// WriteFile replaces the file at path with data, mode 0600, through a
// temporary file in the same directory, synced and renamed over it: a
// reader sees the old file or the new one, never half of one. Errors name
// the file.
func WriteFile(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name()) // ours, just made
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if unixModes {
		if err := tmp.Chmod(0o600); err != nil { // CreateTemp makes it 0600, whatever the umask; say so anyway
			return err
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
