// Package text holds the one way toolgate cuts text to a byte bound.
package text

import (
	"fmt"
	"unicode/utf8"
)

// Cut returns the longest prefix of s of at most n bytes that ends on a rune
// boundary (a cut never splits a character).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(0, n)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Clip cuts s to at most n bytes, marker included (at a rune boundary), and
// says how much it cut: "…[truncated: N bytes in all]". Clipping clipped
// text changes nothing.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := fmt.Sprintf("…[truncated: %d bytes in all]", len(s))
	return Cut(s, n-len(marker)) + marker
}
