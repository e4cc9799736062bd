package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// docs/library.md's install, as written: a module of one's own requires
// toolgate through a replace pointing at a clone (no version of toolgate is
// on a module proxy), and the quickstart's program, copied into it, builds.
// Modules come from the module cache this clone's own build filled, and the
// go.mod files of a few more (the module graph of a new module is not
// pruned as toolgate's is) from the module proxy the build used.
func TestALibraryUsersModuleBuildsFromAClone(t *testing.T) {
	root := moduleRoot(t)
	page, err := os.ReadFile(filepath.Join(root, "docs", "library.md"))
	if err != nil {
		t.Fatal(err)
	}
	replace := "go mod edit -require github.com/toolgate/toolgate@v0.0.0 -replace github.com/toolgate/toolgate=../toolgate"
	for _, want := range []string{replace, "go mod tidy", "go install ./cmd/toolgate"} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("docs/library.md does not say %q", want)
		}
	}
	dir := t.TempDir()
	// The clone, beside the module as the page has it (../toolgate).
	if err := os.Symlink(root, filepath.Join(dir, "toolgate")); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(dir, "myagent")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	for _, cmd := range []string{
		"go mod init example.com/myagent",
		replace,
		"go mod tidy",
		"go build -o myagent .",
	} {
		f := strings.Fields(cmd)
		c := exec.Command(f[0], f[1:]...)
		c.Dir, c.Env = mod, env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(mod, "myagent")); err != nil {
		t.Fatalf("the program was not built: %v", err)
	}
}
