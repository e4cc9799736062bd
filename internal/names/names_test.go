package names

import (
	"strings"
	"testing"
)

// The reserved forms package workflows refuses look-alikes of: the run's
// own and the doors'.
var forms = []string{"rule:", "grant:", "policy:", "elicitation:", "webhook:", "slack:", "(caller)"}

// Each name: whether Check takes it (and, if not, what its error says) and
// which form, if any, it looks like.
func TestNames(t *testing.T) {
	for _, c := range []struct {
		what, name string
		refused    []string // "": Check takes it; else each string its error says
		looks      string   // the form it looks like, or ""
	}{
		// Honest names pass, and look like no form.
		{"ascii", "alice", nil, ""},
		{"a dot", "bob.smith", nil, ""},
		{"an accent, composed", "José", nil, ""},
		{"Chinese", "李雷", nil, ""},
		{"an apostrophe", "o'neil", nil, ""},
		{"a space inside", "Ann Lee", nil, ""},
		{"an e-mail address", "ops@example.com", nil, ""},
		{"Cyrillic, honest", "Борис", nil, ""},
		{"Greek, honest", "Αλέξης", nil, ""},
		{"a word like a form, without its colon", "Grant", nil, ""},
		{"a form's word, then more", "rules", nil, ""},
		{"a caller, without parentheses", "caller", nil, ""},

		// The forms themselves, and in other cases.
		{"a rule", "rule:x", nil, "rule:"},
		{"uppercase", "RULE:x", nil, "rule:"},
		{"mixed case", "Slack:alice", nil, "slack:"},
		{"uppercase with an I", "POLICY:always_approve", nil, "policy:"},
		{"capital I for l", "ruIe:x", nil, "rule:"},
		{"digit 1 for l", "s1ack:bob", nil, "slack:"},
		{"the withdrawal's", "(caller)", nil, "(caller)"},
		{"the withdrawal's, more after", "(CALLER) bob", nil, "(caller)"},
		{"elicitation", "elicitation:alice", nil, "elicitation:"},
		{"webhook", "webhook:ops", nil, "webhook:"},

		// Look-alikes made of letters of other scripts. A word that mixes
		// scripts is refused whatever it looks like: Cyrillic г is no
		// confusable of g (its skeleton is r), but beside Latin letters it
		// passes "гrant" off as "grant".
		{"Cyrillic г among Latin", "гrant:bob", []string{`the word "гrant" mixes scripts`, "Cyrillic (U+0433 'г' at byte 0)", "Latin (U+0072 'r' at byte 2)"}, ""},
		{"Cyrillic е among Latin", "rulе:x", []string{`the word "rulе" mixes scripts`, "Latin (U+0072 'r' at byte 0)", "Cyrillic (U+0435 'е' at byte 3)"}, "rule:"},
		{"Greek ρ among Latin", "ρolicy:x", []string{`"ρolicy" mixes scripts`, "Greek (U+03C1 'ρ' at byte 0)"}, "policy:"},
		{"Greek ο among Latin", "webhοok:ops", []string{"Greek (U+03BF 'ο' at byte 4)"}, "webhook:"},
		{"Cyrillic in the parentheses", "(саllеr)", []string{"mixes scripts"}, "(caller)"},
		{"Latin A among Cyrillic", "Aлекс", []string{"mixes scripts"}, ""},
		// A word of one script passes Check, but its skeleton tells it.
		{"all Cyrillic, capital І for l", "роІісу:x", nil, "policy:"},
		{"Cyrillic word, Latin word", "Борис Smith", nil, ""},
		{"Han and kana", "山田たろう", nil, ""},
		{"Han and Latin", "李lei", nil, ""},
		{"Armenian full stop for the colon", "rule։x", nil, "rule:"},
		{"an accent over a letter", "ŕule:x", nil, "rule:"},

		// Compatibility forms: NFKC changes them.
		{"fullwidth r", "ｒule:x", []string{"U+FF52 'ｒ'", "at byte 0", "NFKC", `"rule:x"`}, "rule:"},
		{"fullwidth colon", "grant：bob", []string{"U+FF1A", "NFKC"}, "grant:"},
		{"a ligature", "ﬁona", []string{"U+FB01", "NFKC", `"fiona"`}, ""},
		{"decomposed é", "Jose\u0301", []string{"U+0301", "at byte 4", "NFKC", `"José"`}, ""},
		{"mathematical bold", "𝐫ule:x", []string{"U+1D42B", "NFKC"}, "rule:"},

		// Invisible runes.
		{"zero-width space inside", "ru\u200ble:x", []string{"U+200B (zero-width space)", "at byte 2", "format character"}, "rule:"},
		{"zero-width joiner inside", "gr\u200dant:bob", []string{"U+200D (zero-width joiner)", "format character"}, "grant:"},
		{"zero-width non-joiner", "ali\u200cce", []string{"U+200C (zero-width non-joiner)"}, ""},
		{"bidi override", "\u202erule:x", []string{"U+202E (right-to-left override)", "at byte 0", "bidi"}, "rule:"},
		{"bidi isolate", "alice\u2066", []string{"U+2066 (left-to-right isolate)"}, ""},
		{"soft hyphen", "sla\u00adck:bob", []string{"U+00AD (soft hyphen)"}, "slack:"},
		{"byte order mark", "\ufeffalice", []string{"U+FEFF (zero-width no-break space)"}, ""},
		{"variation selector", "alice\ufe0f", []string{"U+FE0F (variation selector-16)", "default-ignorable"}, ""},
		{"combining grapheme joiner", "ali\u034fce", []string{"U+034F (combining grapheme joiner)", "default-ignorable"}, ""},
		{"hangul filler", "\u3164alice", []string{"U+3164 (hangul filler)", "default-ignorable"}, ""},
		{"a control", "ali\x07ce", []string{"U+0007", "control"}, ""},
		{"a newline", "alice\nrule:x", []string{"U+000A", "control"}, ""},
		{"a tab", "alice\t", []string{"U+0009", "control"}, ""},

		// Spaces.
		{"a leading space", " alice", []string{"U+0020 (space)", "starts with a space"}, ""},
		{"a trailing space", "alice ", []string{"U+0020 (space)", "ends with a space"}, ""},
		{"a no-break space", "ann\u00a0lee", []string{"U+00A0 (no-break space)", "other than U+0020"}, ""},
		{"an ideographic space", "李\u3000雷", []string{"U+3000", "other than U+0020"}, ""},
		{"a line separator", "alice\u2028", []string{"U+2028", "separator"}, ""},

		// Code points no one agrees on.
		{"unassigned", "alice\U000E0080x", []string{"U+E0080"}, ""},
		{"really unassigned", "alice\u0378", []string{"U+0378", "unassigned"}, ""},
		{"a noncharacter", "alice\ufffe", []string{"U+FFFE", "noncharacter"}, ""},
		{"private use", "alice\ue000", []string{"U+E000", "private-use"}, ""},
		{"invalid UTF-8", "ali\xffce", []string{"byte 3 (0xFF)", "not valid UTF-8"}, ""},
		{"empty", "", []string{"empty"}, ""},
	} {
		t.Run(c.what, func(t *testing.T) {
			err := Check(c.name)
			switch {
			case c.refused == nil && err != nil:
				t.Errorf("Check(%q) = %v, want it taken", c.name, err)
			case c.refused != nil && err == nil:
				t.Errorf("Check(%q) took it, want it refused (%s)", c.name, strings.Join(c.refused, ", "))
			case err != nil:
				for _, s := range c.refused {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("Check(%q) = %q, want it to say %q", c.name, err, s)
					}
				}
			}
			form, ok := LooksLike(c.name, forms)
			if form != c.looks || ok != (c.looks != "") {
				t.Errorf("LooksLike(%q) = %q, %v; want %q (skeleton %q)", c.name, form, ok, c.looks, Skeleton(c.name))
			}
		})
	}
}

// Skeleton folds case and maps look-alikes to one prototype, so confusable
// strings have one skeleton and others keep theirs apart.
func TestSkeleton(t *testing.T) {
	same := [][]string{
		{"rule:x", "RULE:x", "ｒule:x", "rulе:x", "ru\u200ble:x"},
		{"grant:bob", "ɡrant:bob", "GRANT:BOB"},
		{"paypal", "𝔭𝒶𝕪𝕡𝕒ℓ", "PAYPAL"},
		{"policy", "ρolicy", "pol\u0131cy"},
	}
	for _, set := range same {
		want := Skeleton(set[0])
		for _, s := range set[1:] {
			if got := Skeleton(s); got != want {
				t.Errorf("Skeleton(%q) = %q, want %q, as of %q", s, got, want, set[0])
			}
		}
	}
	for _, pair := range [][2]string{{"alice", "bob"}, {"rule", "rules"}, {"李雷", "李"}, {"José", "Jose"}, {"grant", "гrant"}} {
		if Skeleton(pair[0]) == Skeleton(pair[1]) {
			t.Errorf("Skeleton(%q) = Skeleton(%q) = %q, want them apart", pair[0], pair[1], Skeleton(pair[0]))
		}
	}
	if s := Skeleton("ali\xffce"); s == "" {
		t.Error("Skeleton of invalid UTF-8 is empty")
	}
}

// A form's look-alike is found among several forms, the first that fits
// named; no form, or an empty one, finds nothing.
func TestLooksLikeForms(t *testing.T) {
	if f, ok := LooksLike("SLACK:bob", []string{"rule:", "slack:"}); !ok || f != "slack:" {
		t.Errorf("LooksLike(SLACK:bob) = %q, %v", f, ok)
	}
	if f, ok := LooksLike("rule:x", nil); ok {
		t.Errorf("LooksLike with no forms = %q", f)
	}
	if f, ok := LooksLike("alice", []string{""}); ok {
		t.Errorf("LooksLike with an empty form = %q", f)
	}
}

func TestCodePoint(t *testing.T) {
	for r, want := range map[rune]string{'r': "U+0072 'r'", 0x301: "U+0301", ' ': "U+0020 (space)", 0xFF52: "U+FF52 'ｒ'", 0x200B: "U+200B (zero-width space)", 0x7: "U+0007", 0x1D42B: "U+1D42B '𝐫'"} {
		if got := CodePoint(r); got != want {
			t.Errorf("CodePoint(%U) = %q, want %q", r, got, want)
		}
	}
}

// A long name costs no more than a short one: Check finds what NFKC
// changes at its place, and LooksLike compares the start of a name only,
// invisible runes left out before it counts.
func TestLongNames(t *testing.T) {
	long := strings.Repeat("n", 2<<20)
	if err := Check(long + "ｒ"); err == nil || !strings.Contains(err.Error(), "U+FF52 'ｒ' at byte 2097152") {
		t.Errorf("Check(a long name, then ｒ) = %v", err)
	}
	if err := Check(long + "e\u0301"); err == nil || !strings.Contains(err.Error(), "U+0301 at byte 2097153") {
		t.Errorf("Check(a long name, then a decomposed é) = %v", err)
	}
	if f, ok := LooksLike(strings.Repeat("\u200b", 1000)+"rule:x", forms); !ok || f != "rule:" {
		t.Errorf("LooksLike(1000 zero-width spaces, then rule:x) = %q, %v", f, ok)
	}
	if f, ok := LooksLike("RULE:"+long, forms); !ok || f != "rule:" {
		t.Errorf("LooksLike(RULE: then a long name) = %q, %v", f, ok)
	}
	if f, ok := LooksLike(long+"rule:", forms); ok {
		t.Errorf("LooksLike(a long name ending in rule:) = %q", f)
	}
}
