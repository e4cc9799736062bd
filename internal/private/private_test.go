package private

import (
	"os"
	"path/filepath"
	"testing"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestFilesAreForTheirOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := Dir(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if m := mode(t, d); m != 0o700 {
			t.Errorf("%s is %o, want 700", d, m)
		}
	}
	db := filepath.Join(dir, "x.db")
	if err := SQLite(db); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, db); m != 0o600 {
		t.Errorf("new database file %o, want 600", m)
	}
	// Left readable by an older version, with its WAL beside it.
	for _, p := range []string{db, db + "-wal"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := SQLite(db); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{db, db + "-wal"} {
		if m := mode(t, p); m != 0o600 {
			t.Errorf("%s is %o after SQLite, want 600", p, m)
		}
	}
}
