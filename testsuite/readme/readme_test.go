package readme

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's and every docs page's blocks, each page in a fresh directory
// of its own, in the order a reader copies them. `toolgate` and
// `./toolgate` are the binary of this source; `go run ./cmd/toolgate` runs
// it too (the same program, without a second link), and `go run ./PKG` or
// `go build -o NAME ./PKG` build this source's package. `examples/` is this
// clone's. The embedded server listens on a free port, given as
// TEMPORAL_ADDRESS, which every command reads.
//
// TestPagesRunInReadingOrder runs every block too, in one directory; this
// test, each page in a fresh one, is left to CI (TOOLGATE_LONG_TESTS=1), so
// the README's test command stays within five minutes on two cores.
func TestPagesRunAsWritten(t *testing.T) {
	if os.Getenv("TOOLGATE_LONG_TESTS") != "1" {
		t.Skip("each page in a fresh directory: TOOLGATE_LONG_TESTS=1 runs it, as CI does (TestPagesRunInReadingOrder runs every block here)")
	}
	root := moduleRoot(t)
	pages := pagesOf(t, root)
	bin := buildToolgate(t, root)
	for _, page := range pages {
		t.Run(strings.TrimSuffix(filepath.Base(page), ".md"), func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(root, page))
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := Parse(page, src)
			if err != nil {
				t.Fatal(err)
			}
			newPage(t, root, bin).run(blocks)
		})
	}
}

// A newcomer's path, in one directory, in the order they read: the README,
// then every docs page in the order of the README's Reference table
// (issue #46: docs/guards.md's first block failed after the README's demo
// had made the same keys; docs/inbox.md's run found its ticket closed by
// the README's walk). Between two pages the reader stops what the last one
// left running (Ctrl-C), as the pages say to.
func TestPagesRunInReadingOrder(t *testing.T) {
	runInOrder(t, readingOrder(t, moduleRoot(t)))
}

// readingOrder is the README, then the pages its Reference table links, in
// its order; a docs page the table leaves out fails the test.
func readingOrder(t *testing.T, root string) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(src), "\n## Reference\n")
	if !ok {
		t.Fatal("README.md has no Reference section")
	}
	order := []string{"README.md"}
	for _, m := range regexp.MustCompile(`(?m)^\| \[docs/([a-z0-9-]+\.md)\]`).FindAllStringSubmatch(table, -1) {
		order = append(order, filepath.Join("docs", m[1]))
	}
	for _, page := range pagesOf(t, root) {
		if !slices.Contains(order, page) {
			t.Errorf("%s is not in the README's Reference table: a newcomer does not find it", page)
		}
	}
	return order
}

// runInOrder runs pages one after the other in one directory; between two
// pages the reader stops what the last one left running.
func runInOrder(t *testing.T, pages []string) {
	root := moduleRoot(t)
	bin := buildToolgate(t, root)
	p := newPage(t, root, bin)
	for _, page := range pages {
		src, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Parse(page, src)
		if err != nil {
			t.Fatal(err)
		}
		p.runID = ""
		p.run(blocks)
		if t.Failed() {
			t.Fatalf("%s, read after the pages before it, failed (each page alone: TestPagesRunAsWritten)", page)
		}
		p.stopAll()
	}
}

// page is one page's run: its directory, its environment, the blocks still
// running in the background.
type page struct {
	t       *testing.T
	root    string
	dir     string
	env     []string
	bg      []*background
	ran     int
	skipped []string
	// runID is the id the last `toolgate run --id ID` block gave its run:
	// the card the inbox step approves (earlier pages may leave other
	// runs waiting in the same data directory).
	runID string
}

var runIDFlag = regexp.MustCompile(`toolgate run (?:.* )?--id ([A-Za-z0-9._-]+)`)

// noteRun remembers the run id block b starts, if it names one.
func (p *page) noteRun(b Block) {
	switch m := runIDFlag.FindStringSubmatch(b.Code); {
	case m != nil:
		p.runID = m[1]
	case strings.Contains(b.Code, "toolgate demo"):
		p.runID = "" // the demo's run has an id of its own: the inbox lists it alone
	}
}

func newPage(t *testing.T, root, bin string) *page {
	dir := t.TempDir()
	binDir, cache := filepath.Join(dir, ".readme-bin"), filepath.Join(dir, ".readme-cache")
	for _, d := range []string{binDir, cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "toolgate")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(cache, "go-shim.sh")
	if err := os.WriteFile(shim, []byte(goShim), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEMPORAL_") && !strings.HasPrefix(kv, "BASH_ENV=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"BASH_ENV="+shim, "TOOLGATE_README_REPO="+root, "TOOLGATE_README_BIN="+bin, "TOOLGATE_README_CACHE="+cache,
		"TEMPORAL_ADDRESS="+freeAddress(t), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
	p := &page{t: t, root: root, dir: dir, env: env}
	t.Cleanup(p.stopAll)
	return p
}

// goShim is what `go` means to a block (bash sources it: BASH_ENV).
const goShim = `go() {
  case "$1 $2" in
  "run ./cmd/toolgate") shift 2; toolgate "$@" ;;
  "build -o")
    if [ "$4" = ./cmd/toolgate ]; then cp "$TOOLGATE_README_BIN" "$3"
    else command go -C "$TOOLGATE_README_REPO" build -o "$PWD/$3" "$4"; fi ;;
  "run ./"*)
    pkg=$2; shift 2; out="$TOOLGATE_README_CACHE/$(printf %s "$pkg" | tr / _)"
    [ -x "$out" ] || command go -C "$TOOLGATE_README_REPO" build -o "$out" "$pkg" || return
    "$out" "$@" ;;
  *) command go "$@" ;;
  esac
}
`

func (p *page) run(blocks []Block) {
	t := p.t
	for _, b := range blocks {
		switch b.Kind {
		case NotRun:
			p.skipped = append(p.skipped, fmt.Sprintf("%s (%s)", b.Where(), b.Reason))
		case NeedsDev:
			p.start(Block{File: b.File, Line: b.Line, Code: "toolgate dev --data .toolgate-dev", Until: "ready"})
		case SameAs:
			p.sameAs(b)
		case Run:
			p.noteRun(b)
			p.foreground(b)
		case Background:
			p.noteRun(b)
			p.start(b)
		case Approve:
			p.approve(b)
		case Wait:
			p.wait(b)
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d blocks and steps run; not run: %d%s", p.ran, len(p.skipped), bulleted(p.skipped))
}

func bulleted(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return "\n  - " + strings.Join(ss, "\n  - ")
}

// shell is a block's command: bash, stopping at the first command that fails.
func (p *page) shell(ctx context.Context, code string, out *syncBuffer) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", code)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = p.dir, p.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (p *page) foreground(b Block) {
	p.ran++
	deadline := time.Now().Add(b.Within)
	for {
		out, err := p.once(b)
		if b.Fails {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				err = nil // the refusal the page shows
			} else if err == nil {
				err = errors.New("it exited 0, and the page shows it refused")
			}
		}
		miss := missing(out, b.Expect)
		if err == nil && miss == "" {
			return
		}
		if time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		why := fmt.Sprint(err)
		if err == nil {
			why = "its output does not say " + miss
		}
		p.t.Errorf("%s: the block, run as written, failed: %s\n--- block\n%s--- output\n%s", b.Where(), why, b.Code, out)
		return
	}
}

func (p *page) once(b Block) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out syncBuffer
	err := p.shell(ctx, b.Code, &out).Run()
	return out.String(), err
}

func missing(out string, expect []string) string {
	for _, e := range expect {
		if !strings.Contains(out, e) {
			return fmt.Sprintf("%q", e)
		}
	}
	return ""
}

// sameAs checks that a Go block is the code a test compiles and runs.
func (p *page) sameAs(b Block) {
	p.ran++
	src, err := os.ReadFile(filepath.Join(p.root, b.Path))
	if err != nil {
		p.t.Fatalf("%s: %v", b.Where(), err)
	}
	want, err := Region(src)
	if err != nil {
		p.t.Fatalf("%s: %s: %v", b.Where(), b.Path, err)
	}
	if b.Code != want {
		p.t.Errorf("%s: the block is not %s's README region; the file has:\n%s\nthe page shows:\n%s", b.Where(), b.Path, want, b.Code)
	}
}

// stopAll stops the page's background blocks as Ctrl-C would, then kills
// what is left.
func (p *page) stopAll() {
	for i := len(p.bg) - 1; i >= 0; i-- {
		bg := p.bg[i]
		_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-bg.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGKILL)
			<-bg.done
		}
	}
	p.bg = nil
}

// pagesOf lists the README and the docs pages, relative to root.
func pagesOf(t *testing.T, root string) []string {
	pages := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs pages under %s: %v", root, err)
	}
	sort.Strings(docs)
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	return pages
}

func moduleRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// buildToolgate builds the binary as a reader's `go build` does (no test
// tags).
func buildToolgate(t *testing.T, root string) string {
	bin := filepath.Join(t.TempDir(), "toolgate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/toolgate")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/toolgate: %v\n%s", err, out)
	}
	return bin
}

func freeAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
