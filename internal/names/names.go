// Package names checks the names people give a run (an approver's, a
// rewinder's) and tells a name that looks like a reserved one.
//
// Two checks, for two tricks:
//
//   - Check refuses a name whose bytes are not what a reader sees: invalid
//     UTF-8; an invisible rune — a control, a format character (a zero-width
//     space or joiner, a bidi control, a soft hyphen), a default-ignorable
//     one (a variation selector, a Hangul filler); an unassigned or
//     private-use code point; a space other than U+0020, or one at either
//     end; and a name NFKC normalization changes (fullwidth ｒ, the ligature
//     ﬁ, a decomposed é). Each error says why and names the code point as
//     U+XXXX. It refuses, too, a word that mixes scripts (UTS #39's highly
//     restrictive level, word by word): Cyrillic г beside Latin letters
//     ("гrant:bob") is how a look-alike is made of a letter no confusables
//     table maps to a Latin one. A name that passes prints as itself, one
//     rune after another. It takes names with spaces, accents and any
//     script ("José", "李雷", "o'neil", "Борис Smith"): it is not the PRECIS
//     IdentifierClass, which refuses spaces and most punctuation, but close
//     to its FreeformClass with NFKC required.
//   - LooksLike tells whether a name still looks like one of some forms
//     ("rule:", "slack:", "(caller)") once each is reduced to its UTS #39
//     confusable skeleton, case-folded (Skeleton): Cyrillic г for r, Greek ο
//     for o, "RULE" for "rule" and "ruIe" (capital I) for "rule" all look
//     alike to it.
//
// Neither is a policy: the caller says which names it refuses, and why
// (package workflows refuses a decision named like what the run or a door
// writes itself).
package names

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Check says why name is not a name that prints as itself, or returns nil.
// An empty name is refused: whether a name may be left out is the caller's
// to say.
func Check(name string) error {
	if name == "" {
		return errors.New("the name is empty")
	}
	if !utf8.ValidString(name) {
		i := invalidAt(name)
		return fmt.Errorf("byte %d (0x%02X) is not valid UTF-8", i, name[i])
	}
	for i, r := range name {
		if why := hidden(r); why != "" {
			return fmt.Errorf("%s at byte %d is %s", CodePoint(r), i, why)
		}
	}
	if !norm.NFKC.IsNormalString(name) {
		r, i := changedAt(name)
		return fmt.Errorf("%s at byte %d is changed by NFKC normalization (the name normalizes to %q): a compatibility or decomposed form shows one name and is another",
			CodePoint(r), i, norm.NFKC.String(name))
	}
	if strings.HasPrefix(name, " ") {
		return errors.New("U+0020 (space) at byte 0: the name starts with a space")
	}
	if strings.HasSuffix(name, " ") {
		return fmt.Errorf("U+0020 (space) at byte %d: the name ends with a space", len(name)-1)
	}
	return mixedScripts(name)
}

// mixedScripts says which word of name mixes scripts a word may not mix, or
// returns nil. A word is a run of letters and marks; it may hold letters of
// one script, or of Latin, Han and Japanese kana, or of Latin, Han and
// Bopomofo, or of Latin, Han and Hangul (UTS #39's highly restrictive
// level, applied to each word, so "Борис Smith" passes). A mixed word is how
// a look-alike without a confusable letter is made: Cyrillic г beside Latin
// letters ("гrant:bob"), which a skeleton keeps as r.
func mixedScripts(name string) error {
	type first struct {
		script string
		r      rune
		at     int
	}
	var seen []first
	start := 0
	for i, r := range name {
		if !unicode.In(r, unicode.L, unicode.M) {
			seen, start = seen[:0], i+utf8.RuneLen(r)
			continue
		}
		sc := scriptOf(r)
		if sc == "" || slices.ContainsFunc(seen, func(f first) bool { return f.script == sc }) {
			continue
		}
		seen = append(seen, first{sc, r, i})
		var scripts []string
		for _, f := range seen {
			scripts = append(scripts, f.script)
		}
		if mayMix(scripts) {
			continue
		}
		end := len(name)
		if j := strings.IndexFunc(name[start:], func(r rune) bool { return !unicode.In(r, unicode.L, unicode.M) }); j >= 0 {
			end = start + j
		}
		var parts []string
		for _, f := range seen {
			parts = append(parts, fmt.Sprintf("%s (%s at byte %d)", f.script, CodePoint(f.r), f.at))
		}
		return fmt.Errorf("the word %q mixes scripts: %s; a word takes letters of one script (or Latin with Han and kana, Bopomofo or Hangul), "+
			"or one letter passes for another", name[start:end], strings.Join(parts, ", "))
	}
	return nil
}

// mixes are the sets of scripts one word may mix (UTS #39, highly restrictive).
var mixes = [][]string{
	{"Latin", "Han", "Hiragana", "Katakana"},
	{"Latin", "Han", "Bopomofo"},
	{"Latin", "Han", "Hangul"},
}

// mayMix reports whether one word may hold letters of all of scripts.
func mayMix(scripts []string) bool {
	if len(scripts) < 2 {
		return true
	}
	for _, m := range mixes {
		if !slices.ContainsFunc(scripts, func(s string) bool { return !slices.Contains(m, s) }) {
			return true
		}
	}
	return false
}

// scriptTable is a script's name and table.
type scriptTable struct {
	name  string
	table *unicode.RangeTable
}

// scripts are Unicode's scripts but Common and Inherited (no script of
// their own), in a fixed order: the most used first, then by name.
var scripts = func() []scriptTable {
	first := []string{"Latin", "Han", "Cyrillic", "Greek", "Arabic", "Hiragana", "Katakana", "Hangul", "Hebrew", "Devanagari", "Thai", "Armenian", "Bopomofo"}
	var out []scriptTable
	for _, n := range first {
		out = append(out, scriptTable{n, unicode.Scripts[n]})
	}
	for _, n := range slices.Sorted(maps.Keys(unicode.Scripts)) {
		if n != "Common" && n != "Inherited" && !slices.Contains(first, n) {
			out = append(out, scriptTable{n, unicode.Scripts[n]})
		}
	}
	return out
}()

// scriptOf is the script of r, or "" (Common, Inherited, none).
func scriptOf(r rune) string {
	for _, s := range scripts {
		if unicode.Is(s.table, r) {
			return s.name
		}
	}
	return ""
}

// CodePoint names r as U+XXXX, followed by the rune itself in quotes when
// it prints on its own (a mark does not), or by its name when it is a
// well-known invisible one.
func CodePoint(r rune) string {
	if n, ok := invisible[r]; ok {
		return fmt.Sprintf("U+%04X (%s)", r, n)
	}
	if hidden(r) == "" && !unicode.Is(unicode.M, r) {
		return fmt.Sprintf("U+%04X %q", r, r)
	}
	return fmt.Sprintf("U+%04X", r)
}

// invisible names the invisible runes most used to disguise a name.
var invisible = map[rune]string{
	' ':    "space",
	0x00A0: "no-break space",
	0x00AD: "soft hyphen",
	0x034F: "combining grapheme joiner",
	0x061C: "arabic letter mark",
	0x115F: "hangul choseong filler",
	0x1160: "hangul jungseong filler",
	0x180E: "mongolian vowel separator",
	0x200B: "zero-width space",
	0x200C: "zero-width non-joiner",
	0x200D: "zero-width joiner",
	0x200E: "left-to-right mark",
	0x200F: "right-to-left mark",
	0x202A: "left-to-right embedding",
	0x202B: "right-to-left embedding",
	0x202C: "pop directional formatting",
	0x202D: "left-to-right override",
	0x202E: "right-to-left override",
	0x2060: "word joiner",
	0x2066: "left-to-right isolate",
	0x2067: "right-to-left isolate",
	0x2068: "first strong isolate",
	0x2069: "pop directional isolate",
	0x3164: "hangul filler",
	0xFE0F: "variation selector-16",
	0xFEFF: "zero-width no-break space",
	0xFFA0: "halfwidth hangul filler",
}

// hidden says why r may not be seen as itself, or "" when it prints (U+0020
// included: where a space may stand is Check's to say).
func hidden(r rune) string {
	switch {
	case r == ' ':
		return ""
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "a format character: it is not drawn, or it changes how what follows is drawn (zero-width spaces and joiners, bidi controls, the soft hyphen)"
	case ignorable(r):
		return "default-ignorable: it is not drawn"
	case unicode.Is(unicode.Co, r):
		return "a private-use character: it means whatever a font makes of it"
	case unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp):
		return "a space or separator other than U+0020"
	case !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs):
		return fmt.Sprintf("unassigned (in Unicode %s) or a noncharacter", unicode.Version)
	}
	return ""
}

// ignorable reports whether r is a default-ignorable code point that is not
// a format character (Cf): variation selectors, Hangul fillers, the
// combining grapheme joiner, the reserved ranges kept for them.
func ignorable(r rune) bool {
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// invalidAt is the index of the first byte of s that does not start a
// valid UTF-8 sequence.
func invalidAt(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return 0
}

// changedAt is the rune of s (and its index) at which NFKC normalization
// changes s: from where s is known to be in NFKC up to (QuickSpan), the end
// of the shortest span that is not — looked for over a few runes only, so
// a long name costs no more than a short one.
func changedAt(s string) (rune, int) {
	n := norm.NFKC.QuickSpanString(s)
	k := 0
	for i, r := range s[n:] {
		if k++; k > 64 {
			break
		}
		if !norm.NFKC.IsNormalString(s[n : n+i+utf8.RuneLen(r)]) {
			return r, n + i
		}
	}
	r, _ := utf8.DecodeRuneInString(s[n:])
	return r, n
}

// Skeleton is the UTS #39 confusable skeleton of s, case-folded: s in NFKC,
// its default-ignorable runes dropped, case-folded, then mapped through
// Unicode's confusables table (github.com/mtibben/confusables: NFD, each
// rune to its prototype, NFD again) and folded again — the last two steps
// until nothing changes (at most a few rounds). Two strings with the same
// skeleton can be taken for each other; the skeleton itself is for
// comparing, never for showing.
//
// Folding first maps a capital as its small letter (I to i, so "POLICY" is
// "policy"); LooksLike also maps capitals as they look before folding them
// (I to l, so "ruIe" is "rule").
func Skeleton(s string) string {
	return settle(cases.Fold().String(prepare(s)))
}

// prepare is s as valid UTF-8 in NFKC, without default-ignorable runes.
func prepare(s string) string {
	s = norm.NFKC.String(strings.ToValidUTF8(s, "\uFFFD"))
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Cf, r) || ignorable(r) {
			return -1
		}
		return r
	}, s)
}

// settle maps s through the confusables table and folds its case until
// neither changes it.
func settle(s string) string {
	for range 4 {
		t := cases.Fold().String(confusables.Skeleton(s))
		if t == s {
			break
		}
		s = t
	}
	return s
}

// LooksLike reports whether name looks like it starts with one of forms,
// and which: whether the skeleton of name (Skeleton, or the same with
// capitals mapped before they are folded) starts with the skeleton of the
// form, once nonspacing marks are left out of both (a mark over a letter
// does not make "ŕule:" another word to a reader in a hurry). So "ｒule:x",
// "гrant:bob", "RULE:x", "ruIe:x" and "ru\u200ble:x" all look like "rule:"
// or "grant:".
//
// Only the start of name is compared (lookAhead letters, with their marks),
// so a long name costs no more than a short one.
func LooksLike(name string, forms []string) (form string, ok bool) {
	start := head(prepare(name), lookAhead)
	seen := []string{bare(settle(cases.Fold().String(start))), bare(settle(start))}
	for _, f := range forms {
		want := bare(Skeleton(f))
		if want == "" {
			continue
		}
		for _, s := range seen {
			if strings.HasPrefix(s, want) {
				return f, true
			}
		}
	}
	return "", false
}

// lookAhead is how many runes other than marks of a name LooksLike
// compares: more than any form's skeleton holds.
const lookAhead = 64

// head is s up to its n+1th rune that is not a mark (all of s if it has
// fewer): its first n such runes, each with the marks that follow it.
func head(s string, n int) string {
	for i, r := range s {
		if unicode.Is(unicode.M, r) {
			continue
		}
		if n--; n < 0 {
			return s[:i]
		}
	}
	return s
}

// bare is s (a skeleton: in NFD) without its nonspacing marks.
func bare(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}
