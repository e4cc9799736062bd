package tool

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

func TestCanonical(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		// Layout and order.
		{"object keys sorted", `{"query":"auth","limit":5}`, `{"limit":5,"query":"auth"}`},
		{"already sorted", `{"limit":5,"query":"auth"}`, `{"limit":5,"query":"auth"}`},
		{"nested sorted at every depth, arrays keep order",
			`{"b":[{"z":1,"a":2},[3,1,2]],"a":{"y":{"d":0,"c":[{"f":1,"e":2}]},"x":null}}`,
			`{"a":{"x":null,"y":{"c":[{"e":2,"f":1}],"d":0}},"b":[{"a":2,"z":1},[3,1,2]]}`},
		{"whitespace removed", " \t\r\n{ \"b\" :\n[ 1 , 2 ] ,\t\"a\" : { } , \"c\" : [ ] }\n ", `{"a":{},"b":[1,2],"c":[]}`},
		{"shorter key first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"scalar string", ` "x" `, `"x"`},
		{"scalar number", `7`, `7`},
		{"empty containers", `[{},[],""]`, `[{},[],""]`},

		// UTF-16 ordering: U+1F600 is the surrogate pair D83D DE00, below U+E000.
		{"utf16 order emoji before U+E000", "{\"\ue000\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\ue000\":1}"},
		{"utf16 order emoji before U+FFFD", "{\"\ufffd\":1,\"\U0001F600\":2,\"\u00e9\":3}", "{\"\u00e9\":3,\"\U0001F600\":2,\"\ufffd\":1}"},
		{"utf16 order by escapes", `{"\ue000":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\ue000\":1}"},
		{"utf16 order within supplementary", "{\"\U0001F601\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\U0001F601\":1}"},
		{"utf16 order BMP below D800", "{\"\U0001F600\":1,\"\ud7ff\":2}", "{\"\ud7ff\":2,\"\U0001F600\":1}"},
		// RFC 8785 §3.2.3.
		{"rfc8785 sort sample",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		// RFC 8785 §3.2.2, but numbers are kept exact rather than rounded to float64.
		{"rfc8785 sample",
			`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},

		// Strings.
		{"escape decoded", `"\u00e9"`, `"é"`},
		{"escape same as literal", `"é"`, `"é"`},
		{"uppercase hex escape", `"\u00E9\u00c9"`, `"éÉ"`},
		{"surrogate pair decoded", `"\ud83d\ude00"`, "\"\U0001F600\""},
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
		{"control chars as lowercase u00xx", `"\u0000\u0001\u001F\u000b\u007f"`, "\"\\u0000\\u0001\\u001f\\u000b\x7f\""},
		{"html and line separators literal", `"\u003c\u003e\u0026\u2028\u2029<>&"`, "\"<>&\u2028\u2029<>&\""},
		{"escaped quote in key", `{"a\"b":1,"a":2}`, `{"a":2,"a\"b":1}`},
		{"escaped and literal key sort together", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"non-ASCII kept", `"日本語 ✓"`, `"日本語 ✓"`},

		// Numbers.
		{"int", `5`, `5`},
		{"one forms 1.0", `1.0`, `1`},
		{"one forms 1e0", `1e0`, `1`},
		{"one forms 10e-1", `10e-1`, `1`},
		{"one forms 0.1e1", `0.1e1`, `1`},
		{"one forms 1E+0", `1E+0`, `1`},
		{"hundred", `100`, `100`},
		{"hundred 1e2", `1e2`, `100`},
		{"hundred 1.00e+2", `1.00e+2`, `100`},
		{"negative zero", `-0`, `0`},
		{"zero fraction", `0.0`, `0`},
		{"zero exponent", `0e5`, `0`},
		{"negative zero fraction exponent", `-0.000e-7`, `0`},
		{"negative", `-12.50`, `-12.5`},
		{"fraction", `3.14159`, `3.14159`},
		{"1e20 plain", `1e20`, `100000000000000000000`},
		{"21 digits plain", `123456789012345678901`, `123456789012345678901`},
		{"22 digits exponential", `1234567890123456789012`, `1.234567890123456789012e+21`},
		{"1e21", `1e21`, `1e+21`},
		{"1e21 plain", `1000000000000000000000`, `1e+21`},
		{"0.000001", `0.000001`, `0.000001`},
		{"1e-6", `1e-6`, `0.000001`},
		{"1e-7", `1e-7`, `1e-7`},
		{"0.0000001", `0.0000001`, `1e-7`},
		{"1.5e-7", `1.5e-7`, `1.5e-7`},
		{"negative exponential", `-2.5e30`, `-2.5e+30`},
		{"big int keeps digits", `123456789012345678901234567890`, `1.2345678901234567890123456789e+29`},
		{"2^53+1 kept", `9007199254740993`, `9007199254740993`},
		{"2^53", `9007199254740992`, `9007199254740992`},
		{"many fraction digits", `0.1000000000000000055511151231257827`, `0.1000000000000000055511151231257827`},
		{"decimal point inside", `12345.678e-2`, `123.45678`},
		{"leading zeros of fraction", `0.00123`, `0.00123`},
		{"exponent with leading zeros", `1e007`, `10000000`},
		{"huge exponent", `1e999999999999999999999`, `1e+999999999999999999999`},
		{"huge negative exponent", `-12e-999999999999999999999`, `-1.2e-999999999999999999998`},
		{"exponent just fits int64 path", `1.5e999999999999999999`, `1.5e+999999999999999999`},
		{"float64-max plus", `1.7976931348623157e309`, `1.7976931348623157e+309`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(json.RawMessage(tc.in))
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			require.True(t, json.Valid(got), "output is not valid JSON: %s", got)
			again, err := Canonical(got)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again), "not idempotent")
		})
	}
}

func TestCanonicalErrors(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	cases := []struct {
		name, in, want string
	}{
		{"empty", ``, "empty input at byte offset 0"},
		{"whitespace only", " \n", "empty input at byte offset 2"},
		{"trailing data", `{} {}`, "trailing data after the value at byte offset 3"},
		{"trailing comma-less value", `1 2`, "trailing data"},
		{"trailing garbage", `"a"x`, "trailing data after the value at byte offset 3"},
		{"unterminated object", `{"a":1`, "unexpected end of input"},
		{"unterminated array", `[1,2`, "unexpected end of input"},
		{"unterminated string", `"abc`, "unterminated string at byte offset 0"},
		{"trailing comma object", `{"a":1,}`, `want a string key at byte offset 7`},
		{"trailing comma array", `[1,]`, "want a value at byte offset 3"},
		{"missing colon", `{"a" 1}`, "want ':' at byte offset 5"},
		{"unquoted key", `{a:1}`, "want a string key at byte offset 1"},
		{"single quotes", `'a'`, "unexpected character"},
		{"bad literal", `tru`, "invalid literal"},
		{"bad literal case", `True`, "unexpected character"},
		{"nan", `NaN`, "unexpected character"},
		{"leading zero", `01`, "trailing data after the value at byte offset 1"},
		{"plus sign", `+1`, "unexpected character"},
		{"bare minus", `-`, "want a digit"},
		{"dot without digits", `1.`, "want a digit after '.'"},
		{"leading dot", `.5`, "unexpected character"},
		{"exponent without digits", `1e`, "want a digit in the exponent"},
		{"exponent sign without digits", `1e+`, "want a digit in the exponent"},
		{"hex number", `0x10`, "trailing data"},
		{"raw control char", "\"a\x01b\"", "control character 0x01 in string at byte offset 2"},
		{"raw newline in string", "\"a\nb\"", "control character"},
		{"invalid escape", `"\x"`, `invalid escape "\\x" at byte offset 1`},
		{"short unicode escape", `"\u12"`, `invalid \u escape at byte offset 1`},
		{"bad hex in escape", `"\u12g4"`, `invalid \u escape`},
		{"invalid utf8", "\"a\xffb\"", "invalid UTF-8 in string at byte offset 2"},
		{"invalid utf8 in key", "{\"\xc3\":1}", "invalid UTF-8 in string at byte offset 2"},
		{"truncated utf8", "\"\xe2\x82\"", "invalid UTF-8"},
		{"utf8 encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8"},
		{"overlong utf8", "\"\xc0\xaf\"", "invalid UTF-8"},
		{"lone high surrogate", `"\ud83d"`, `lone high surrogate \ud83d at byte offset 1`},
		{"high surrogate then char", `"\ud83dx"`, "lone high surrogate"},
		{"high surrogate then non-low escape", `"\ud83d\u0041"`, "lone high surrogate"},
		{"two high surrogates", `"\ud83d\ud83d"`, "lone high surrogate"},
		{"lone low surrogate", `"a\ude00"`, `lone low surrogate \ude00 at byte offset 2`},
		{"duplicate key", `{"a":1,"a":2}`, `duplicate key "a" at byte offset 7`},
		{"duplicate key unsorted", `{"b":1,"a":2,"b":3}`, `duplicate key "b" at byte offset 13`},
		{"duplicate key after unescape", `{"é":1,"\u00e9":2}`, `duplicate key "é" at byte offset 8`},
		{"duplicate nested", `[{"x":{"k":1,"k":1}}]`, `duplicate key "k" at byte offset 13`},
		{"too deep arrays", deep(129, "[", "]"), "nesting deeper than 128 at byte offset 128"},
		{"too deep objects", strings.Repeat(`{"a":`, 129) + "1" + strings.Repeat("}", 129), "nesting deeper than 128 at byte offset 640"},
		{"too large", `"` + strings.Repeat("a", 1<<20) + `"`, "more than the 1048576 allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(json.RawMessage(tc.in))
			require.Error(t, err, "accepted, got %s", got)
			require.Contains(t, err.Error(), tc.want)
			require.Nil(t, got)
		})
	}
}

func TestCanonicalLimitsInclusive(t *testing.T) {
	deep := strings.Repeat("[", 128) + strings.Repeat("]", 128)
	got, err := Canonical(json.RawMessage(deep))
	require.NoError(t, err)
	require.Equal(t, deep, string(got))

	big := `"` + strings.Repeat("a", 1<<20-2) + `"`
	got, err = Canonical(json.RawMessage(big))
	require.NoError(t, err)
	require.Equal(t, big, string(got))
}

func TestCanonicalResultNotShared(t *testing.T) {
	first, err := Canonical(json.RawMessage(`{"b":1,"a":2}`))
	require.NoError(t, err)
	_, err = Canonical(json.RawMessage(`{"zzzzzz":[1,2,3],"y":"overwrite"}`))
	require.NoError(t, err)
	require.Equal(t, `{"a":2,"b":1}`, string(first))
}

func TestCanonicalConcurrent(t *testing.T) {
	inputs := map[string]string{
		`{"query":"auth","limit":5}`:       `{"limit":5,"query":"auth"}`,
		`[1.0, {"y":"\u00e9","x":[2e2]}]`:  `[1,{"x":[200],"y":"é"}]`,
		`{"\ue000":1,"\ud83d\ude00":"\n"}`: "{\"\U0001F600\":\"\\n\",\"\ue000\":1}",
	}
	var wg sync.WaitGroup
	for range 8 {
		for in, want := range inputs {
			wg.Go(func() {
				for range 200 {
					got, err := Canonical(json.RawMessage(in))
					if err != nil || string(got) != want {
						t.Errorf("Canonical(%s) = %s, %v; want %s", in, got, err, want)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

func TestKey(t *testing.T) {
	a, err := Key("search", json.RawMessage(`{"query":"auth","limit":5}`))
	require.NoError(t, err)
	b, err := Key("search", json.RawMessage(`{ "limit": 5.0, "query": "\u0061uth" }`))
	require.NoError(t, err)
	require.Equal(t, `search::{"limit":5,"query":"auth"}`, a)
	require.Equal(t, a, b)

	other, err := Key("search", json.RawMessage(`{"query":"auth","limit":6}`))
	require.NoError(t, err)
	require.NotEqual(t, a, other)
	otherTool, err := Key("lookup", json.RawMessage(`{"query":"auth","limit":5}`))
	require.NoError(t, err)
	require.NotEqual(t, a, otherTool)

	for _, blank := range []string{"", " ", "\n\t\r ", "{}", " { } "} {
		k, err := Key("ping", json.RawMessage(blank))
		require.NoError(t, err, "%q", blank)
		require.Equal(t, "ping::{}", k, "%q", blank)
	}

	_, err = Key("search", json.RawMessage(`{"a":1,"a":2}`))
	require.ErrorContains(t, err, "tool search: arguments: canonical JSON: duplicate key")
}

func TestDigest(t *testing.T) {
	args := json.RawMessage(`{"query":"auth","limit":5}`)
	key, err := Key("search", args)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(key))
	d, err := Digest("search", args)
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(sum[:]), d)
	require.Len(t, d, 64)

	same, err := Digest("search", json.RawMessage(`{"limit":5,"query":"auth"}`))
	require.NoError(t, err)
	require.Equal(t, d, same)
	diff, err := Digest("search", json.RawMessage(`{"limit":5,"query":"auth2"}`))
	require.NoError(t, err)
	require.NotEqual(t, d, diff)
	diffTool, err := Digest("find", args)
	require.NoError(t, err)
	require.NotEqual(t, d, diffTool)

	empty, err := Digest("ping", nil)
	require.NoError(t, err)
	emptySum := sha256.Sum256([]byte("ping::{}"))
	require.Equal(t, hex.EncodeToString(emptySum[:]), empty)

	_, err = Digest("close_ticket", json.RawMessage(`{"id":`))
	require.ErrorContains(t, err, "tool close_ticket: arguments:")
}

func TestCompareKeysMatchesUTF16(t *testing.T) {
	keys := []string{"", "a", "ab", "b", "\u007f", "\u0080", "\u07ff", "\u0800", "\ud7ff",
		"\ue000", "\uefff", "\uf000", "\uffff", "\U00010000", "\U0001F600", "\U0010FFFF",
		"a\U0001F600", "a\uffff", "\U0001F600a", "\U0001F600\ue000"}
	utf16Cmp := func(a, b string) int {
		return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
	}
	for _, a := range keys {
		for _, b := range keys {
			require.Equal(t, utf16Cmp(a, b), compareKeys([]byte(a), []byte(b)), "%q vs %q", a, b)
		}
	}
}

var fuzzSeeds = []string{
	`{"query":"auth","limit":5}`,
	`{"query":"login","limit":5,"filters":{"status":["open","pending"],"priority":2}}`,
	`[1, 1.0, 1e0, 10e-1, -0, 0.0, 0e5, 1e21, 1e-7, 0.000001]`,
	`123456789012345678901234567890`,
	`9007199254740993`,
	`"\u00e9\ud83d\ude00\u2028<>&\n\u001f\"\\"`,
	`{"\ue000":1,"\ud83d\ude00":2,"é":{"b":[],"a":{}}}`,
	`[true,false,null,"",{},[]]`,
	` { "a" : [ { "z" : 1 , "y" : [ 2 , { "x" : 3 } ] } ] } `,
	`-12.5e-10`,
	`{"a":1,"a":2}`,
	`"\ud83d"`,
	"\"\xff\"",
	`[1.5e999999999999999999999]`,
}

func FuzzCanonical(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, x []byte) {
		c, err := Canonical(x)
		if err != nil {
			if json.Valid(x) {
				requireValidJSONRejection(t, x, err)
			}
			return
		}
		require.True(t, json.Valid(x), "accepted invalid JSON %q", x)
		require.True(t, json.Valid(c), "output %q is not valid JSON", c)

		// Property 1: idempotent.
		again, err := Canonical(c)
		require.NoError(t, err)
		require.Equal(t, string(c), string(again))

		// Property 2: the same value in other layouts has the same canonical form.
		v := decodeNumbers(t, x)
		indented, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		c2, err := Canonical(indented)
		require.NoError(t, err, "%s", indented)
		require.Equal(t, string(c), string(c2), "MarshalIndent layout %s", indented)

		respelled := respell(nil, v)
		c3, err := Canonical(respelled)
		require.NoError(t, err, "%s", respelled)
		require.Equal(t, string(c), string(c3), "respelled layout %s", respelled)

		// Property 3: canonicalisation never changes the value.
		eq, known := semEqual(v, decodeNumbers(t, c))
		if known {
			require.True(t, eq, "value changed: %q -> %q", x, c)
		}
	})
}

func FuzzKeyDistinct(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s, fuzzSeeds[(i+1)%len(fuzzSeeds)])
		f.Add(s, string(respell(nil, decodeIfValid(s))))
	}
	f.Add(`{"a":1,"b":2}`, `{"b":2,"a":1}`)
	f.Add(`9007199254740993`, `9007199254740992`)
	f.Add(`1e400`, `10e399`)
	f.Add(`"\u00e9"`, `"é"`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ca, errA := Canonical(json.RawMessage(a))
		cb, errB := Canonical(json.RawMessage(b))
		if errA != nil || errB != nil {
			return
		}
		eq, known := semEqual(decodeNumbers(t, []byte(a)), decodeNumbers(t, []byte(b)))
		if !known {
			return
		}
		if bytes.Equal(ca, cb) {
			require.True(t, eq, "%q and %q differ but share the key %s", a, b, ca)
		}
		if eq {
			require.Equal(t, string(ca), string(cb), "%q and %q are equal but have different keys", a, b)
		}
	})
}

// requireValidJSONRejection checks that Canonical rejected JSON that
// encoding/json accepts only for one of the reasons it is meant to.
func requireValidJSONRejection(t *testing.T, x []byte, err error) {
	t.Helper()
	for _, reason := range []string{"duplicate key", "invalid UTF-8", "surrogate", "nesting deeper", "more than the"} {
		if strings.Contains(err.Error(), reason) {
			return
		}
	}
	t.Fatalf("rejected valid JSON %q: %v", x, err)
}

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

func decodeIfValid(s string) any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// semEqual compares decoded values, numbers as exact decimals. known is false
// when a number is beyond what big.Rat parses (exponents over a million).
func semEqual(a, b any) (eq, known bool) {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false, true
		}
		known = true
		for k, av := range a {
			bv, ok := b[k]
			if !ok {
				return false, true
			}
			e, kn := semEqual(av, bv)
			if kn && !e {
				return false, true
			}
			known = known && kn
		}
		return true, known
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false, true
		}
		known = true
		for i := range a {
			e, kn := semEqual(a[i], b[i])
			if kn && !e {
				return false, true
			}
			known = known && kn
		}
		return true, known
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false, true
		}
		ra, okA := new(big.Rat).SetString(string(a))
		rb, okB := new(big.Rat).SetString(string(b))
		if !okA || !okB {
			return false, false
		}
		return ra.Cmp(rb) == 0, true
	default:
		return a == b, true
	}
}

// respell encodes a decoded value in a different but equivalent spelling:
// keys in reverse byte order, every string character as a \u escape
// (surrogate pairs above U+FFFF), numbers with an extra fraction zero and an
// explicit exponent.
func respell(dst []byte, v any) []byte {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		dst = append(dst, "{\n"...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, " ,\t"...)
			}
			dst = respellString(dst, k)
			dst = append(dst, " : "...)
			dst = respell(dst, v[k])
		}
		return append(dst, "\r}"...)
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, " , "...)
			}
			dst = respell(dst, e)
		}
		return append(dst, ']')
	case json.Number:
		return respellNumber(dst, string(v))
	case string:
		return respellString(dst, v)
	default:
		b, _ := json.Marshal(v)
		return append(dst, b...)
	}
}

func respellString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, u := range utf16.Encode([]rune(s)) {
		dst = fmt.Appendf(dst, `\u%04X`, u)
	}
	return append(dst, '"')
}

func respellNumber(dst []byte, n string) []byte {
	mant, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	if strings.Contains(mant, ".") {
		mant += "0"
	} else {
		mant += ".0"
	}
	if !hasExp {
		exp = "+0"
	}
	return append(dst, mant+"E"+exp...)
}

const benchArgs = `{"query":"login","limit":5,"filters":{"status":["open","pending"],"priority":2}}`

func BenchmarkCanonical(b *testing.B) {
	raw := json.RawMessage(benchArgs)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJSONMarshal(b *testing.B) {
	var v map[string]any
	if err := json.Unmarshal([]byte(benchArgs), &v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
