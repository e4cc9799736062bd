package private

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// WriteFile replaces a file — one left readable by others included — with
// a 0600 file holding exactly the new data, and leaves nothing else behind.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.json")
	if err := os.WriteFile(path, []byte("old, and readable by all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, 100) // refuses a file others may read
	if err != nil || string(got) != "new" {
		t.Fatalf("after WriteFile: %q, %v", got, err)
	}
	if m := mode(t, path); runtime.GOOS != "windows" && m != 0o600 {
		t.Errorf("mode %o, want 600", m)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want the file alone: no temporary file left", entries, err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), []byte("x")); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
}
