// Package text holds the one way toolgate cuts text to a byte bound, and
// counts things in words.
package text

import (
	"fmt"
	"strings"
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

// Count is n and noun, plural unless n is 1: "1 link", "3 links",
// "2 replies" (a noun ending in a consonant and y).
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if k := len(noun); k > 1 && noun[k-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[k-2])) {
		return fmt.Sprintf("%d %sies", n, noun[:k-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
