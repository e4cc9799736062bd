package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/text"
)

// Human output shows text that planners, tools, approvers and clients chose:
// arguments, results, reasons, answers, errors. Printed raw, a control
// character in it could rewrite the operator's terminal (ESC[…, OSC 8 links,
// \r and \b overwriting what was shown) and a Unicode bidi override could
// show "close_ticket TKT-3" for bytes that say otherwise. oneLine and
// multiLine print such characters as escapes (\x1b, \u202e, \r); --json
// output stays exact.

// oneLine is s for one field of one line: every control character (\n and
// \t included), format character (bidi overrides and isolates, zero-width
// characters, tags), line or paragraph separator and invalid UTF-8 byte is
// escaped.
func oneLine(s string) string { return escapeText(s, false) }

// multiLine is oneLine but keeps \n: for free text printed on lines of its
// own, such as an error message.
func multiLine(s string) string { return escapeText(s, true) }

// oneLineBytes is oneLine of raw JSON (arguments, results).
func oneLineBytes(b []byte) string { return oneLine(string(b)) }

func escapeText(s string, keepNewline bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || mustEscape(r, keepNewline) { // RuneError: maybe an invalid byte
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case mustEscape(r, keepNewline):
			switch {
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x80:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// mustEscape reports whether r may change how a terminal shows the text
// around it: C0 and C1 controls and DEL (Cc), format characters (Cf: bidi
// controls such as U+202E, zero-width characters, tag characters) and the
// Unicode line and paragraph separators.
func mustEscape(r rune, keepNewline bool) bool {
	if r == '\n' {
		return !keepNewline
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// truncate cuts s (already escaped) to at most n bytes on a rune boundary,
// marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return text.Cut(s, n) + "…"
}
