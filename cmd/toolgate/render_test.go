package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// hostile is text a planner, a tool or a client may put in a run: a color
// escape, a carriage return and a backspace (overwrite what was shown), a
// bidi override and isolate, a C1 CSI (as a rune and as a lone byte, which is
// invalid UTF-8), a bell, a tag character, a line separator and a newline.
var hostile = hostileUTF8[:hostileCut] + "\x9b" + hostileUTF8[hostileCut:]

// hostileUTF8 is hostile without the invalid byte, which JSON cannot carry.
const (
	hostileUTF8 = "\x1b[31mred\x1b[0m\r\bok\u202eevil\u2066\u009b\a\U000E0041\u2028\n2nd"
	hostileCut  = len("\x1b[31mred\x1b[0m\r\bok\u202eevil\u2066\u009b")
)

// hostileSnapshot is a run whose every text holds h; its raw JSON arguments
// and results hold h unescaped (as only a broken peer could send it) when
// raw, else as valid JSON.
func hostileSnapshot(h string, raw bool) tgclient.Snapshot {
	js := func(prefix, tail string) json.RawMessage {
		if raw {
			return json.RawMessage(`{"` + prefix + `":"` + h + tail + `"}`)
		}
		b, _ := json.Marshal(map[string]string{prefix: h + tail})
		return b
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	it := workflows.Interrupt{CallID: "c-3" + h, Tool: "close_ticket" + h, CallArgs: js("q", ""),
		ArgsDigest: "d" + h, Kind: workflows.KindGate + tool.DecisionKind(h), Reason: h, RequestedAt: at, ExpiresAt: at}
	return tgclient.Snapshot{
		State: workflows.State{
			Status:     "waiting_for_approval" + h,
			Turn:       1,
			Next:       []string{"gate:close_ticket" + h},
			Interrupts: []workflows.Interrupt{it},
			Answer:     h,
			Error:      h,
			BlockedOn:  &tool.ConfirmationRequired{CallID: h, Tool: h, CallArgs: js("q", "")},
			Refused:    []workflows.Refusal{{Signal: "approve" + h, CallID: h, Error: h, At: at}},
		},
		Trace: []workflows.TraceRecord{
			{Seq: 1, Turn: 1, CallID: "c-1", Tool: "search_tickets", Args: js("q", ""), Status: "ok",
				Result: js("r", strings.Repeat("é", 100)), At: at},
			{Seq: 2, Turn: 1, CallID: "c-3" + h, Tool: h, Args: js("q", ""), Status: "rejected" + h,
				Approver: h, Reason: h, Error: h, Result: js("r", ""), At: at},
		},
	}
}

// assertEscaped checks that out holds no character that a terminal acts on
// but the newline, and that the hostile text is shown escaped.
func assertEscaped(t *testing.T, out string) {
	t.Helper()
	var raw []string
	for i, r := range out {
		if r == '\n' {
			continue
		}
		bad := unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
		if r == utf8.RuneError {
			_, size := utf8.DecodeRuneInString(out[i:])
			bad = size == 1
		}
		if bad {
			raw = append(raw, fmt.Sprintf("%U at byte %d", r, i))
		}
	}
	assert.Empty(t, raw, "raw characters in %q", out)
	assert.Contains(t, out, `\x1b[31mred\x1b[0m\r\x08ok\u202eevil\u2066\u009b\x9b\x07\U000e0041\u2028`)
}

// Human output of status, next, trace, pending and a followed run escapes
// what planners, tools and clients wrote; --json keeps it exact.
func TestHumanOutputEscapesControlCharacters(t *testing.T) {
	s := hostileSnapshot(hostile, true)
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: &out}

	t.Run("status", func(t *testing.T) {
		out.Reset()
		require.NoError(t, c.renderStatus(s, false))
		assertEscaped(t, out.String())
		// answer and error are blocks: their newline stays, indented.
		assert.Contains(t, out.String(), "\\u2028\n        2nd\n")
	})
	t.Run("next", func(t *testing.T) {
		out.Reset()
		require.NoError(t, c.renderNext(s, false))
		assertEscaped(t, out.String())
		assert.Equal(t, 1, strings.Count(out.String(), "\n"), "one line per node")
	})
	t.Run("trace", func(t *testing.T) {
		out.Reset()
		require.NoError(t, c.renderTrace(s, false))
		assertEscaped(t, out.String())
		assert.Equal(t, 1+len(s.Trace), strings.Count(out.String(), "\n"), "one line per record: %s", out.String())
		assert.True(t, utf8.ValidString(out.String()), "the result is cut on a rune boundary")
	})
	t.Run("record", func(t *testing.T) {
		out.Reset()
		for _, r := range s.Trace {
			printRecord(&out, r)
		}
		assertEscaped(t, out.String())
		assert.Equal(t, len(s.Trace), strings.Count(out.String(), "\n"))
	})
	t.Run("pending", func(t *testing.T) {
		out.Reset()
		printInbox(&out, []tgclient.PendingCall{{RunID: "run" + hostile, Interrupt: s.State.Interrupts[0]}})
		assertEscaped(t, out.String())
		assert.Equal(t, 2, strings.Count(out.String(), "\n"))
		out.Reset()
		printInterrupt(&out, "run"+hostile, s.State.Interrupts[0])
		assertEscaped(t, out.String())
		assert.Equal(t, 1, strings.Count(out.String(), "\n"))
	})
	t.Run("decision", func(t *testing.T) {
		out.Reset()
		printDecision(&out, workflows.DecisionResult{CallID: hostile, Tool: hostile, Decision: "approved", Approver: hostile})
		assertEscaped(t, out.String())
		assert.Equal(t, 1, strings.Count(out.String(), "\n"))
	})

	t.Run("json is exact", func(t *testing.T) {
		s := hostileSnapshot(hostileUTF8, false)
		out.Reset()
		require.NoError(t, c.renderStatus(s, true))
		var st workflows.State
		require.NoError(t, json.Unmarshal(out.Bytes(), &st))
		for _, got := range []string{st.Status, st.Next[0], st.Answer, st.Error, st.Interrupts[0].CallID, st.Interrupts[0].Tool,
			string(st.Interrupts[0].Kind), st.Interrupts[0].Reason, st.Interrupts[0].ArgsDigest, st.BlockedOn.Tool,
			st.Refused[0].Signal, st.Refused[0].Error, st.Refused[0].CallID} {
			assert.True(t, strings.HasSuffix(got, hostileUTF8), "%q", got)
		}
		var args map[string]string
		require.NoError(t, json.Unmarshal(st.Interrupts[0].CallArgs, &args))
		assert.Equal(t, hostileUTF8, args["q"])

		out.Reset()
		require.NoError(t, c.renderNext(s, true))
		var next []string
		require.NoError(t, json.Unmarshal(out.Bytes(), &next))
		assert.Equal(t, s.State.Next, next)

		out.Reset()
		require.NoError(t, c.renderTrace(s, true))
		var trace []workflows.TraceRecord
		require.NoError(t, json.Unmarshal(out.Bytes(), &trace))
		require.Len(t, trace, 2)
		assert.Equal(t, hostileUTF8, trace[1].Approver)
		assert.Equal(t, hostileUTF8, trace[1].Reason)
		assert.Equal(t, hostileUTF8, trace[1].Error)
		for _, raw := range []json.RawMessage{trace[1].Args, trace[1].Result} {
			var v map[string]string
			require.NoError(t, json.Unmarshal(raw, &v))
			for _, text := range v {
				assert.Equal(t, hostileUTF8, text)
			}
		}
	})
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain, ünïcödé and emoji 🙂": "plain, ünïcödé and emoji 🙂",
		"a\tb\r\nc":                  `a\tb\r\nc`,
		"\x00\x7f\u0085":             `\x00\x7f\u0085`,
		"abc\u202edef":               `abc\u202edef`,
		"\xff":                       `\xff`,
		"\ufffd":                     "\ufffd", // a real replacement character is text
	} {
		assert.Equal(t, want, oneLine(in), "%q", in)
	}
	assert.Equal(t, "a\nb\\r", multiLine("a\nb\r"))
	assert.Equal(t, "ab…", truncate("abé", 3), "never cuts a rune")
	assert.Equal(t, "abc", truncate("abc", 3))
}
