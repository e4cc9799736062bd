package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseReadsDirectivesAndSteps(t *testing.T) {
	src := "# page\n\n<!-- page: needs toolgate dev -->\n\n" +
		"<!-- run: background, until \"ready\" -->\n```sh\ntoolgate dev\n```\n\n" +
		"```yaml\na: 1\n```\n\n" +
		"<!-- run: expect \"say \\\"hi\\\"\", expect \"c-3, c-4\", within 30s -->\n```sh\necho hi\n```\n\n" +
		"<!-- step: approve in the inbox -->\n\n<!-- step: wait for the background, expect \"done\" -->\n\n" +
		"<!-- not run: needs a cluster of yours -->\n```sh\ntoolgate worker\n```\n\n" +
		"<!-- run: same as examples/x/main.go -->\n```go\nfunc main() {}\n```\n\n```sh\nls\n```\n"
	blocks, err := Parse("page.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	for _, b := range blocks {
		kinds = append(kinds, b.Kind)
	}
	want := []Kind{NeedsDev, Background, Run, Approve, Wait, NotRun, SameAs, Run}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	if b := blocks[1]; b.Until != "ready" || b.Code != "toolgate dev\n" || b.Line != 6 {
		t.Errorf("background block %+v", b)
	}
	if b := blocks[2]; len(b.Expect) != 2 || b.Expect[0] != `say "hi"` || b.Expect[1] != "c-3, c-4" || b.Within != 30*time.Second {
		t.Errorf("expectations %+v", b)
	}
	if b := blocks[4]; len(b.Expect) != 1 || b.Expect[0] != "done" {
		t.Errorf("wait step %+v", b)
	}
	if blocks[5].Reason != "needs a cluster of yours" || blocks[6].Path != "examples/x/main.go" || blocks[7].Code != "ls\n" {
		t.Errorf("blocks %+v", blocks[5:])
	}
}

// A page cannot opt a block out silently, nor misspell its way out.
func TestParseRefusesWhatItCannotHonour(t *testing.T) {
	for src, want := range map[string]string{
		"<!-- not run: -->\n```sh\nls\n```\n":                      "needs a reason",
		"<!-- not run: later -->\n```sh\nls\n```\n":                "needs a reason",
		"<!-- run: expect \"x\" -->\ntext\n```sh\nls\n```\n":       "followed by text",
		"<!-- run: expect \"x\" -->\n```yaml\na: 1\n```\n":         "never run",
		"<!-- run: backgrund, until \"x\" -->\n```sh\nls\n```\n":   "unknown option",
		"<!-- run: background -->\n```sh\nls\n```\n":               "needs `until",
		"<!-- run: expect \"x\", within 10m -->\n```sh\nls\n```\n": "up to 2m",
		"```go\nfunc main() {}\n```\n":                             "must say which file",
		"<!-- run: same as a.go -->\n```sh\nls\n```\n":             "for Go and TypeScript blocks",
		"```ts\nconst a = 1\n```\n":                                "a TypeScript block must say which file",
		"<!-- step: click somewhere -->\n":                         "unknown step",
		"<!-- page: needs a database -->\n":                        "unknown page directive",
		"<!-- run expect \"x\" -->\n```sh\nls\n```\n":              "looks like a directive",
		"<!-- run: expect \"x\" -->\n":                             "no block after it",
		"```sh\nls\n":                                              "never closed",
		"```sh\n\n```\n":                                           "an empty block",
	} {
		_, err := Parse("p.md", []byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", src, err, want)
		}
	}
}

func TestRegionIsTheMarkedLinesDedented(t *testing.T) {
	src := "package main\n\nfunc f() {\n\t// README:begin\n\tif x {\n\t\ty()\n\t}\n\n\tz()\n\t// README:end\n}\n"
	got, err := Region([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if want := "if x {\n\ty()\n}\n\nz()\n"; got != want {
		t.Errorf("Region = %q, want %q", got, want)
	}
	if got, _ := Region([]byte("whole\n")); got != "whole\n" {
		t.Errorf("a file without markers is all region: %q", got)
	}
	if _, err := Region([]byte("// README:end\n// README:begin\n")); err == nil {
		t.Error("markers out of order must be an error")
	}
	for _, bad := range []string{"// README:begin\nx\n// README:end\n// README:end\n", "// README:begin\n// README: end\n"} {
		if _, err := Region([]byte(bad)); err == nil {
			t.Errorf("Region(%q): a marker twice or misspelt must be an error", bad)
		}
	}
}

// Every page of this repository parses: no directive misspelt or stray.
func TestThePagesParse(t *testing.T) {
	root := moduleRoot(t)
	for _, page := range pagesOf(t, root) {
		src, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(page, src); err != nil {
			t.Error(err)
		}
	}
}
