package tool

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Limits on what Canonical accepts.
const (
	maxCanonicalInput = 1 << 20 // bytes
	maxCanonicalDepth = 128     // nested objects and arrays
)

// Canonical returns the canonical JSON form of one JSON value, following
// RFC 8785 (JCS): object members sorted by key (as UTF-16 code units) at every
// depth, no insignificant whitespace, strings with minimal escaping, and
// numbers in one canonical form. Numbers are normalised as exact decimals (never
// through float64), so distinct numbers stay distinct, and printed with the
// ECMAScript Number::toString layout: 1, 1.0 and 10e-1 are all "1".
//
// It rejects invalid JSON, data after the value, invalid UTF-8, lone
// surrogates, duplicate keys, nesting deeper than 128 and input over 1 MiB;
// the error names the problem and its byte offset.
func Canonical(raw json.RawMessage) ([]byte, error) {
	c, err := canonicalize(raw)
	if err != nil {
		return nil, err
	}
	defer c.release()
	return bytes.Clone(c.out), nil
}

// Key is the memo key of a call: toolName + "::" + the canonical JSON of its
// arguments. Empty or whitespace-only arguments count as {}.
func Key(toolName string, args json.RawMessage) (string, error) {
	c, err := canonicalizeArgs(toolName, args)
	if err != nil {
		return "", err
	}
	defer c.release()
	return toolName + "::" + string(c.out), nil
}

// Digest is the hex SHA-256 of Key(toolName, args). An approval carries it as
// args_digest, which binds the approval to that exact call.
func Digest(toolName string, args json.RawMessage) (string, error) {
	c, err := canonicalizeArgs(toolName, args)
	if err != nil {
		return "", err
	}
	defer c.release()
	c.tmp = append(append(append(c.tmp[:0], toolName...), "::"...), c.out...)
	sum := sha256.Sum256(c.tmp)
	return hex.EncodeToString(sum[:]), nil
}

func canonicalizeArgs(toolName string, args json.RawMessage) (*canonicalizer, error) {
	if isBlank(args) {
		args = json.RawMessage("{}")
	}
	c, err := canonicalize(args)
	if err != nil {
		return nil, fmt.Errorf("tool %s: arguments: %w", toolName, err)
	}
	return c, nil
}

func isBlank(b []byte) bool {
	for _, x := range b {
		if !isSpace(x) {
			return false
		}
	}
	return true
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// canonicalizer is the state of one Canonical call. Its buffers are pooled,
// so a call in steady state allocates only its result.
type canonicalizer struct {
	in      []byte
	pos     int
	out     []byte   // canonical output
	members []member // members of the objects being parsed, innermost last
	keys    []byte   // decoded keys that had escapes; only appended to during a call
	scratch []byte   // unescaped string or number digits, one at a time
	tmp     []byte   // copy of an object's members while they are reordered
}

// member is one object member already written to out[start:end] (without
// its separating comma); key is its decoded key, pos its offset in the input.
type member struct {
	key        []byte
	start, end int
	pos        int
}

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

// canonicalize runs a pooled canonicalizer over raw. On success the caller
// reads c.out and must call c.release.
func canonicalize(raw []byte) (*canonicalizer, error) {
	return canonicalizeUpTo(raw, maxCanonicalInput)
}

// canonicalizeUpTo is canonicalize with another bound on the input's size.
func canonicalizeUpTo(raw []byte, limit int) (*canonicalizer, error) {
	if len(raw) > limit {
		return nil, fmt.Errorf("canonical JSON: input is %d bytes, more than the %d allowed", len(raw), limit)
	}
	c := canonPool.Get().(*canonicalizer)
	c.in, c.pos = raw, 0
	c.out, c.members, c.keys = c.out[:0], c.members[:0], c.keys[:0]
	if err := c.document(); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

func (c *canonicalizer) release() {
	// Drop references into the caller's input, and oversized buffers.
	c.in = nil
	clear(c.members[:cap(c.members)])
	if cap(c.out) > 64<<10 || cap(c.keys) > 64<<10 || cap(c.scratch) > 64<<10 || cap(c.tmp) > 64<<10 {
		return
	}
	canonPool.Put(c)
}

func (c *canonicalizer) errorf(off int, format string, args ...any) error {
	return fmt.Errorf("canonical JSON: %s at byte offset %d", fmt.Sprintf(format, args...), off)
}

// unexpected reports the byte at c.pos (or the end of input) as out of place.
func (c *canonicalizer) unexpected(want string) error {
	if c.pos >= len(c.in) {
		return c.errorf(c.pos, "unexpected end of input, want %s", want)
	}
	return c.errorf(c.pos, "unexpected character %q, want %s", c.in[c.pos], want)
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) && isSpace(c.in[c.pos]) {
		c.pos++
	}
}

// next returns the byte at c.pos, or 0 at the end of input (0 is never valid
// there, so callers treat it as unexpected).
func (c *canonicalizer) next() byte {
	if c.pos < len(c.in) {
		return c.in[c.pos]
	}
	return 0
}

func (c *canonicalizer) document() error {
	c.skipSpace()
	if c.pos == len(c.in) {
		return c.errorf(c.pos, "empty input")
	}
	if err := c.value(1); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.in) {
		return c.errorf(c.pos, "trailing data after the value")
	}
	return nil
}

// value writes the value at c.pos; depth is the nesting depth an object or
// array there would have.
func (c *canonicalizer) value(depth int) error {
	switch b := c.next(); {
	case b == '{':
		return c.object(depth)
	case b == '[':
		return c.array(depth)
	case b == '"':
		return c.stringValue()
	case b == '-' || isDigit(b):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.unexpected("a value")
	}
}

func (c *canonicalizer) literal(lit string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(lit)) {
		return c.errorf(c.pos, "invalid literal, want %s", lit)
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canonicalizer) array(depth int) error {
	if depth > maxCanonicalDepth {
		return c.errorf(c.pos, "nesting deeper than %d", maxCanonicalDepth)
	}
	c.pos++
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.next() == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(depth + 1); err != nil {
			return err
		}
		c.skipSpace()
		switch c.next() {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.unexpected("',' or ']'")
		}
	}
}

func (c *canonicalizer) object(depth int) error {
	if depth > maxCanonicalDepth {
		return c.errorf(c.pos, "nesting deeper than %d", maxCanonicalDepth)
	}
	c.pos++
	c.out = append(c.out, '{')
	start, base := len(c.out), len(c.members)
	c.skipSpace()
	if c.next() == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	for {
		c.skipSpace()
		if err := c.member(depth, base); err != nil {
			return err
		}
		c.skipSpace()
		switch c.next() {
		case ',':
			c.pos++
		case '}':
			c.pos++
			err := c.sortMembers(base, start)
			c.members = c.members[:base]
			c.out = append(c.out, '}')
			return err
		default:
			return c.unexpected("',' or '}'")
		}
	}
}

// member writes one "key":value pair and records it on c.members.
func (c *canonicalizer) member(depth, base int) error {
	if c.next() != '"' {
		return c.unexpected("a string key")
	}
	if len(c.members) > base {
		c.out = append(c.out, ',')
	}
	m := member{start: len(c.out), pos: c.pos}
	key, err := c.key()
	if err != nil {
		return err
	}
	c.skipSpace()
	if c.next() != ':' {
		return c.unexpected("':'")
	}
	c.pos++
	c.out = append(c.out, ':')
	c.skipSpace()
	if err := c.value(depth + 1); err != nil {
		return err
	}
	m.key, m.end = key, len(c.out)
	c.members = append(c.members, m)
	return nil
}

// sortMembers puts the members written since out[start] (c.members[base:])
// in canonical order and rejects duplicate keys.
func (c *canonicalizer) sortMembers(base, start int) error {
	ms := c.members[base:]
	if isStrictlySorted(ms) {
		return nil
	}
	slices.SortFunc(ms, func(a, b member) int { return compareKeys(a.key, b.key) })
	for i := 1; i < len(ms); i++ {
		if compareKeys(ms[i-1].key, ms[i].key) == 0 {
			return c.errorf(max(ms[i-1].pos, ms[i].pos), "duplicate key %q", ms[i].key)
		}
	}
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	c.out = c.out[:start]
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.tmp[m.start-start:m.end-start]...)
	}
	return nil
}

func isStrictlySorted(ms []member) bool {
	for i := 1; i < len(ms); i++ {
		if compareKeys(ms[i-1].key, ms[i].key) >= 0 {
			return false
		}
	}
	return true
}

// compareKeys orders decoded keys as JCS does, by UTF-16 code units. UTF-8
// byte order is code point order; the two differ only where a supplementary
// character (lead byte F0–F4) meets one in U+E000–U+FFFF (lead byte EE or EF):
// in UTF-16 the former is a surrogate pair (D800–DBFF first) and sorts first.
// Elsewhere the first differing byte decides, as both strings are at the same
// position of the same-length encoding or at lead bytes that order like their
// code points.
func compareKeys(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	x, y := a[i], b[i]
	if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
		return cmp.Compare(y, x)
	}
	return cmp.Compare(x, y)
}

// key writes the object key at c.pos and returns it decoded.
func (c *canonicalizer) key() ([]byte, error) {
	start := c.pos
	escaped, err := c.scanString()
	if err != nil {
		return nil, err
	}
	if !escaped {
		c.out = append(c.out, c.in[start:c.pos]...)
		return c.in[start+1 : c.pos-1], nil
	}
	// Earlier keys of open objects point into c.keys; appending never
	// changes their bytes, even when it moves to a new array.
	k := len(c.keys)
	if c.keys, err = c.unescape(c.keys, start+1, c.pos-1); err != nil {
		return nil, err
	}
	key := c.keys[k:len(c.keys):len(c.keys)]
	c.out = appendQuoted(c.out, key)
	return key, nil
}

func (c *canonicalizer) stringValue() error {
	start := c.pos
	escaped, err := c.scanString()
	if err != nil {
		return err
	}
	if !escaped {
		// Without escapes the input already is canonical: scanString refused
		// control characters and invalid UTF-8, and '"' cannot occur.
		c.out = append(c.out, c.in[start:c.pos]...)
		return nil
	}
	if c.scratch, err = c.unescape(c.scratch[:0], start+1, c.pos-1); err != nil {
		return err
	}
	c.out = appendQuoted(c.out, c.scratch)
	return nil
}

// scanString moves c.pos past the string starting there, checking that it is
// terminated, holds no raw control characters and is valid UTF-8. It reports
// whether the string contains escapes (which unescape then checks).
func (c *canonicalizer) scanString() (escaped bool, err error) {
	start := c.pos
	i := c.pos + 1
	for i < len(c.in) {
		b := c.in[i]
		switch {
		case b == '"':
			c.pos = i + 1
			return escaped, nil
		case b == '\\':
			escaped = true
			i += 2
		case b < 0x20:
			return false, c.errorf(i, "control character %#02x in string", b)
		case b < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(c.in[i:])
			if r == utf8.RuneError && size <= 1 {
				return false, c.errorf(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return false, c.errorf(start, "unterminated string")
}

// unescape appends the decoded content of c.in[from:to], a string body that
// scanString accepted, to dst.
func (c *canonicalizer) unescape(dst []byte, from, to int) ([]byte, error) {
	in := c.in[:to]
	for i := from; i < to; {
		j := i
		for j < to && in[j] != '\\' {
			j++
		}
		dst = append(dst, in[i:j]...)
		if j == to {
			break
		}
		// scanString guarantees a byte after every backslash.
		i = j + 2
		switch e := in[j+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n, err := c.unicodeEscape(j, to)
			if err != nil {
				return nil, err
			}
			dst = utf8.AppendRune(dst, r)
			i = j + n
		default:
			return nil, c.errorf(j, "invalid escape %q", in[j:j+2])
		}
	}
	return dst, nil
}

// unicodeEscape decodes the \uXXXX escape at c.in[i:] (with its low surrogate
// if it is a high one) and returns the rune and the bytes consumed.
func (c *canonicalizer) unicodeEscape(i, to int) (rune, int, error) {
	r, ok := hex4(c.in[i:to])
	if !ok {
		return 0, 0, c.errorf(i, "invalid \\u escape")
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, 0, c.errorf(i, "lone low surrogate \\u%04x", r)
	case r >= 0xD800 && r <= 0xDBFF:
		lo, ok := hex4(c.in[i+6 : to])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, 0, c.errorf(i, "lone high surrogate \\u%04x", r)
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
	}
	return r, 6, nil
}

// hex4 decodes a \uXXXX escape at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, h := range b[2:6] {
		switch {
		case isDigit(h):
			r = r<<4 | rune(h-'0')
		case 'a' <= h && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case 'A' <= h && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendQuoted appends s (valid UTF-8) as a JCS string: only '"', '\\' and
// control characters are escaped.
func appendQuoted(out, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	out = append(out, '"')
	last := 0
	for i, b := range s {
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		out = append(out, s[last:i]...)
		last = i + 1
		switch b {
		case '"', '\\':
			out = append(out, '\\', b)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
	}
	out = append(out, s[last:]...)
	return append(out, '"')
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// number writes the number at c.pos in canonical form.
func (c *canonicalizer) number() error {
	start := c.pos
	neg := c.next() == '-'
	if neg {
		c.pos++
	}
	intPart, err := c.intPart()
	if err != nil {
		return err
	}
	var frac, exp []byte
	expNeg := false
	if c.next() == '.' {
		c.pos++
		if frac = c.digits(); len(frac) == 0 {
			return c.unexpected("a digit after '.'")
		}
	}
	if b := c.next(); b == 'e' || b == 'E' {
		c.pos++
		if b := c.next(); b == '+' || b == '-' {
			expNeg = b == '-'
			c.pos++
		}
		if exp = c.digits(); len(exp) == 0 {
			return c.unexpected("a digit in the exponent")
		}
	}
	if frac == nil && exp == nil && len(intPart) <= 21 {
		// An integer of up to 21 digits is already in canonical layout
		// (JSON forbids leading zeros); only -0 needs care.
		if intPart[0] == '0' {
			start = c.pos - 1
		}
		c.out = append(c.out, c.in[start:c.pos]...)
		return nil
	}
	c.decimal(neg, intPart, frac, exp, expNeg)
	return nil
}

// intPart scans the integer part of a number: 0 or a digit run not starting with 0.
func (c *canonicalizer) intPart() ([]byte, error) {
	switch b := c.next(); {
	case b == '0':
		c.pos++
		return c.in[c.pos-1 : c.pos], nil
	case isDigit(b):
		return c.digits(), nil
	default:
		return nil, c.unexpected("a digit")
	}
}

func (c *canonicalizer) digits() []byte {
	start := c.pos
	for c.pos < len(c.in) && isDigit(c.in[c.pos]) {
		c.pos++
	}
	return c.in[start:c.pos]
}

// decimal writes the number intPart.frac × 10^±exp exactly: its significant
// digits s (k of them) and decimal exponent n such that the value is
// s × 10^(n−k), laid out as ECMAScript's Number::toString does.
func (c *canonicalizer) decimal(neg bool, intPart, frac, exp []byte, expNeg bool) {
	s := append(append(c.scratch[:0], intPart...), frac...)
	c.scratch = s
	lead := 0
	for lead < len(s) && s[lead] == '0' {
		lead++
	}
	if lead == len(s) {
		c.out = append(c.out, '0')
		return
	}
	trail := len(s)
	for s[trail-1] == '0' {
		trail--
	}
	// The value is s[lead:trail] × 10^(±exp − len(frac) + len(s) − trail).
	shift := int64(len(s)-trail) - int64(len(frac)) + int64(trail-lead)
	s = s[lead:trail]
	if neg {
		c.out = append(c.out, '-')
	}
	for len(exp) > 1 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) > 18 {
		// An exponent beyond int64 only ever prints in exponential form.
		e, _ := new(big.Int).SetString(string(exp), 10)
		if expNeg {
			e.Neg(e)
		}
		e.Add(e, big.NewInt(shift-1))
		c.out = appendExponential(c.out, s)
		if e.Sign() >= 0 {
			c.out = append(c.out, '+')
		}
		c.out = e.Append(c.out, 10)
		return
	}
	e, _ := strconv.ParseInt(string(exp), 10, 64) // exp is nil or at most 18 digits
	if expNeg {
		e = -e
	}
	c.out = appendLayout(c.out, s, e+shift)
}

// appendLayout appends the significant digits s with decimal exponent n
// (value = 0.s × 10^n) as ECMAScript's Number::toString lays them out.
func appendLayout(out, s []byte, n int64) []byte {
	k := int64(len(s))
	switch {
	case k <= n && n <= 21:
		out = append(out, s...)
		for range n - k {
			out = append(out, '0')
		}
	case 0 < n && n <= 21:
		out = append(out, s[:n]...)
		out = append(out, '.')
		out = append(out, s[n:]...)
	case -6 < n && n <= 0:
		out = append(out, '0', '.')
		for range -n {
			out = append(out, '0')
		}
		out = append(out, s...)
	default:
		out = appendExponential(out, s)
		if n-1 >= 0 {
			out = append(out, '+')
		}
		out = strconv.AppendInt(out, n-1, 10)
	}
	return out
}

// appendExponential appends "d.ddde" or "de" for the significant digits s.
func appendExponential(out, s []byte) []byte {
	out = append(out, s[0])
	if len(s) > 1 {
		out = append(out, '.')
		out = append(out, s[1:]...)
	}
	return append(out, 'e')
}
