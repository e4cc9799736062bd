package private

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := os.WriteFile(path, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path, 5); err != nil || string(b) != "token" {
		t.Fatalf("ReadFile 0600: %q, %v", b, err)
	}
	if _, err := ReadFile(path, 4); err == nil || !strings.Contains(err.Error(), "over 4 bytes") {
		t.Fatalf("ReadFile over its bound: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file: %v, want fs.ErrNotExist", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(link, 5); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("ReadFile of a symlink: %v", err)
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return // no Unix modes to refuse
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path, 5); err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) {
		t.Fatalf("ReadFile 0640: %v", err)
	}
}
