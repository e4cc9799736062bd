// Package readme runs the README's and the docs pages' code blocks, in order,
// as a reader would copy them (readme_test.go), so that a page that drifts
// from the code fails the tests.
//
// A page says how each block is run with an HTML comment on the last
// non-blank line before it (invisible where the page is rendered):
//
//	<!-- run: background, until "ready" -->   start it, go on once its output says "ready"
//	<!-- run: expect "closed" -->             run it; its output must say "closed"
//	<!-- run: expect "c-3", within 30s -->    the same, tried again until it does, for at most 30 s
//	<!-- run: fails, expect "has completed" -->  it must exit non-zero, saying so (a refusal the page shows)
//	<!-- run: same as examples/quickstart/main.go -->   a Go (or ts) block: the file's README:begin…README:end region
//	<!-- not run: REASON -->                  not runnable here, and why
//
// A `sh` block with no comment runs and must exit 0. A `go` or `ts` block
// must name the file it shows (the tests compile and run that file). Steps that are
// not a block are comments on a line of their own:
//
//	<!-- step: approve in the inbox -->              a browser approves the call the last background block's inbox lists
//	<!-- step: wait for the background, expect "X" --> the last background block ends (exit 0), having said X
//	<!-- page: needs toolgate dev -->                 the page's blocks run with `toolgate dev` serving
package readme

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Kind is what the runner does with a block or step.
type Kind int

// The kinds of directive.
const (
	Run        Kind = iota // a shell block run in the foreground
	Background             // a shell block started and left running
	NotRun                 // a block not runnable here, with Reason
	SameAs                 // a Go block that must equal a file's region
	Approve                // a step: approve in the inbox, in a browser
	Wait                   // a step: wait for the last background block
	NeedsDev               // a page directive: toolgate dev serves the page
)

// Block is one fenced code block (Lang "sh", "go", …) or one step of a page.
type Block struct {
	File   string
	Line   int // of the opening fence, or of the step's comment
	Lang   string
	Code   string
	Kind   Kind
	Until  string        // Background: the output that says it is ready
	Expect []string      // what the output must contain
	Reason string        // NotRun
	Path   string        // SameAs
	Within time.Duration // Run: try again until it passes, for at most this long
	Fails  bool          // Run: the block must exit non-zero (a refusal the page shows)
}

// Where says where a block is, for messages.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

var (
	directiveRE = regexp.MustCompile(`^<!--\s*(run|not run|step|page):\s*(.*?)\s*-->$`)
	quotedRE    = regexp.MustCompile(`^(until|expect)\s+"((?:[^"\\]|\\.)*)"$`)
)

// runnable are the block languages the runner runs or checks; the others
// (yaml, json, text, output) are shown, not run.
var runnable = map[string]bool{"sh": true, "bash": true, "go": true, "ts": true}

// Parse returns the page's runnable blocks and steps, in order. A
// directive the runner does not know, a "not run" without a reason, a Go
// block that names no file and a directive that belongs to no block are
// errors, so a page cannot silently opt out.
func Parse(file string, src []byte) ([]Block, error) {
	var (
		out     []Block
		pending *Block // the directive before the next block
		pendAt  int
		inFence bool
		fence   string
		cur     Block
		code    strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if inFence {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`") == "" {
				inFence = false
				if runnable[cur.Lang] {
					cur.Code = code.String()
					if err := check(cur); err != nil {
						return nil, err
					}
					out = append(out, cur)
				}
				continue
			}
			code.WriteString(line)
			code.WriteByte('\n')
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			inFence, fence = true, trimmed[:strings.LastIndex(trimmed, "`")+1]
			cur = Block{File: file, Line: n, Lang: strings.TrimSpace(strings.TrimLeft(trimmed, "`")), Kind: Run}
			code.Reset()
			if pending != nil {
				if !runnable[cur.Lang] {
					return nil, fmt.Errorf("%s:%d: a directive before a %q block, which is never run", file, pendAt, cur.Lang)
				}
				d := *pending
				d.File, d.Line, d.Lang = cur.File, cur.Line, cur.Lang
				cur = d
				pending = nil
			}
			continue
		}
		if trimmed == "" {
			continue
		}
		if pending != nil {
			return nil, fmt.Errorf("%s:%d: the directive is followed by text, not by the block it is for", file, pendAt)
		}
		m := directiveRE.FindStringSubmatch(trimmed)
		if m == nil {
			if looksLikeDirective(trimmed) {
				return nil, fmt.Errorf("%s:%d: %q looks like a directive but is not one (see package readme)", file, n, trimmed)
			}
			continue
		}
		d, err := directive(m[1], m[2])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		d.File, d.Line = file, n
		switch d.Kind {
		case Approve, Wait, NeedsDev:
			out = append(out, d)
		default:
			pending, pendAt = &d, n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if inFence {
		return nil, fmt.Errorf("%s:%d: a code block is never closed", file, cur.Line)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s:%d: a directive with no block after it", file, pendAt)
	}
	return out, nil
}

// looksLikeDirective reports a comment that starts as a directive does but
// is not one (a missing colon, a misspelt verb), which must not pass
// silently.
func looksLikeDirective(line string) bool {
	rest, ok := strings.CutPrefix(line, "<!--")
	if !ok {
		return false
	}
	rest = strings.ToLower(strings.TrimSpace(rest))
	for _, verb := range []string{"run", "not run", "notrun", "step", "page", "skip"} {
		if strings.HasPrefix(rest, verb) {
			return true
		}
	}
	return false
}

// directive reads one comment's directive.
func directive(verb, rest string) (Block, error) {
	switch verb {
	case "not run":
		if len(strings.Fields(rest)) < 2 {
			return Block{}, fmt.Errorf("\"not run\" needs a reason a reader understands, not %q", rest)
		}
		return Block{Kind: NotRun, Reason: rest}, nil
	case "page":
		if rest != "needs toolgate dev" {
			return Block{}, fmt.Errorf("unknown page directive %q", rest)
		}
		return Block{Kind: NeedsDev}, nil
	case "step":
		switch {
		case rest == "approve in the inbox":
			return Block{Kind: Approve}, nil
		case strings.HasPrefix(rest, "wait for the background"):
			b := Block{Kind: Wait}
			return b, options(&b, strings.TrimPrefix(rest, "wait for the background"))
		}
		return Block{}, fmt.Errorf("unknown step %q", rest)
	}
	b := Block{Kind: Run}
	if p, ok := strings.CutPrefix(rest, "same as "); ok {
		return Block{Kind: SameAs, Path: strings.TrimSpace(p)}, nil
	}
	if r, ok := strings.CutPrefix(rest, "background"); ok {
		b.Kind, rest = Background, r
	}
	if err := options(&b, rest); err != nil {
		return Block{}, err
	}
	if b.Fails && (b.Kind != Run || len(b.Expect) == 0) {
		return Block{}, errorf("\"fails\" is for a foreground block, with what its refusal must say (expect \"TEXT\")")
	}
	if b.Kind == Background && b.Until == "" {
		return Block{}, errorf("a background block needs `until \"TEXT\"`: what says it is ready")
	}
	return b, nil
}

// options reads `, until "X", expect "Y"…`.
func options(b *Block, rest string) error {
	for _, part := range splitOptions(rest) {
		if part == "fails" {
			b.Fails = true
			continue
		}
		if d, ok := strings.CutPrefix(part, "within "); ok {
			w, err := time.ParseDuration(d)
			if err != nil || w <= 0 || w > 2*time.Minute {
				return errorf("within %q: a duration up to 2m", d)
			}
			b.Within = w
			continue
		}
		m := quotedRE.FindStringSubmatch(part)
		if m == nil {
			return errorf("unknown option %q (until \"TEXT\", expect \"TEXT\", within DURATION or fails)", part)
		}
		text := strings.ReplaceAll(m[2], `\"`, `"`)
		if m[1] == "until" {
			b.Until = text
		} else {
			b.Expect = append(b.Expect, text)
		}
	}
	return nil
}

// splitOptions splits on the commas outside quotes.
func splitOptions(s string) []string {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted && i+1 < len(s):
			cur.WriteByte(c)
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted = !quoted
			cur.WriteByte(c)
		case c == ',' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	parts = append(parts, cur.String())
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// check refuses a block the runner could not honestly run.
func check(b Block) error {
	switch {
	case sourceLangs[b.Lang] != "" && b.Kind != SameAs && b.Kind != NotRun:
		return fmt.Errorf("%s: a %s block must say which file it is (<!-- run: same as FILE -->) or why it is not run", b.Where(), sourceLangs[b.Lang])
	case sourceLangs[b.Lang] == "" && b.Kind == SameAs:
		return fmt.Errorf("%s: \"same as\" is for Go and TypeScript blocks", b.Where())
	case strings.TrimSpace(b.Code) == "":
		return fmt.Errorf("%s: an empty block", b.Where())
	}
	return nil
}

// sourceLangs are the languages whose blocks show a file's region: each
// must say which file (same as), so the page shows the code a test runs.
var sourceLangs = map[string]string{"go": "Go", "ts": "TypeScript"}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// Region returns the lines of a file between a line `// README:begin` and a
// line `// README:end`, each once (the whole file when it has neither), without the
// indentation they share, as a README block shows them.
func Region(src []byte) (string, error) {
	lines := strings.SplitAfter(string(src), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch t := strings.TrimSpace(l); {
		case t == "// README:begin" && begin < 0:
			begin = i
		case t == "// README:end" && end < 0:
			end = i
		case strings.HasPrefix(t, "// README:"):
			return "", fmt.Errorf("line %d: %q: the markers are // README:begin and // README:end, each once, on lines of their own", i+1, t)
		}
	}
	switch {
	case begin < 0 && end < 0:
		return string(src), nil
	case begin < 0 || end < begin:
		return "", errorf("README:begin and README:end do not enclose a region")
	}
	region := lines[begin+1 : end]
	indent, first := "", true
	for _, l := range region {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if lead := l[:len(l)-len(strings.TrimLeft(l, "\t"))]; first || len(lead) < len(indent) {
			indent, first = lead, false
		}
	}
	var b strings.Builder
	for _, l := range region {
		b.WriteString(strings.TrimPrefix(l, indent))
	}
	return b.String(), nil
}
