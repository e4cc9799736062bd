package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/tool"
)

// questions is an elicitation handler that keeps every message it is asked
// and answers with answer(n, message), n counting from 1.
type questions struct {
	mu     sync.Mutex
	asked  []string
	answer func(n int, msg string) *mcp.ElicitResult
}

func (q *questions) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		q.mu.Lock()
		q.asked = append(q.asked, req.Params.Message)
		n := len(q.asked)
		q.mu.Unlock()
		return q.answer(n, req.Params.Message), nil
	}}
}

func (q *questions) all() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.asked...)
}

var approveIt = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}

// rawCall calls name with raw JSON arguments and, with progress, a progress
// token.
func rawCall(t *testing.T, cs *mcp.ClientSession, name, args string, progress bool) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}
	if progress {
		p.SetProgressToken("p-1")
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// A question shows the call whole: a note of 1,900 characters saying
// "Closing TKT-3" before the id TKT-2 is asked with every byte of both, and
// the args_digest the decision is bound to.
func TestElicitShowsTheWholeCall(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ElicitApprovals = true; o.Wait = 10 * time.Second })
	q := &questions{answer: func(int, string) *mcp.ElicitResult { return approveIt }}
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, q.options())
	note := "Closing TKT-3. " + strings.Repeat("x", 1900-len("Closing TKT-3. "))
	args := `{"note":"` + note + `","id":"TKT-2"}`
	res := rawCall(t, cs, "close", args, false)
	if res.IsError {
		t.Fatalf("the call the user approved: %s", resultText(res))
	}
	digest, err := tool.Digest("close", json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	asked := q.all()
	if len(asked) != 1 || !strings.Contains(asked[0], `{"id":"TKT-2","note":"`+note+`"}`) ||
		!strings.Contains(asked[0], "args_digest: "+digest) || !strings.Contains(asked[0], "Tool: close\n") {
		t.Fatalf("asked %q, want once, with the canonical arguments whole and the digest %s", asked, digest)
	}
}

// A call whose arguments do not fit a question whole is not asked; the
// progress notifications and the answer say why, and that an operator
// decides. The answer of a 1,990-character note is that.
func TestElicitRefusesWhatCannotBeShownWhole(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.ElicitApprovals, o.Wait, o.Progress = true, 2*time.Second, 20*time.Millisecond
	})
	q := &questions{answer: func(int, string) *mcp.ElicitResult { return approveIt }}
	var mu sync.Mutex
	var progress []string
	co := q.options()
	co.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, req.Params.Message)
		mu.Unlock()
	}
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, co)
	note := "Closing TKT-3. " + strings.Repeat("x", 1990-len("Closing TKT-3. "))
	args := `{"note":"` + note + `","id":"TKT-2"}`
	res := rawCall(t, cs, "close", args, true)
	want := fmt.Sprintf("not asked by elicitation: the arguments are %d bytes, more than the %d a question shows whole; an operator decides: toolgate approve mcp-alice-r c-1",
		len(`{"id":"TKT-2","note":""}`)+len(note), MaxElicitArgsBytes)
	if !res.IsError || !strings.Contains(resultText(res), want) || res.Meta[MetaNote] != want {
		t.Fatalf("answer %q, note %v; want it to say %q", resultText(res), res.Meta[MetaNote], want)
	}
	if a := q.all(); len(a) != 0 || len(h.runs.decided()) != 0 {
		t.Fatalf("asked %q, decided %v: want nobody asked", a, h.runs.decided())
	}
	mu.Lock()
	defer mu.Unlock()
	said := false
	for _, m := range progress {
		said = said || strings.Contains(m, want)
	}
	if !said {
		t.Fatalf("progress %q: none says %q", progress, want)
	}
}

// A tool's own question (a compliance hold) is for a reviewer: the client's
// user is not asked, and is told an operator decides.
func TestElicitNotForToolInterrupt(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ElicitApprovals = true; o.Wait = time.Second })
	q := &questions{answer: func(int, string) *mcp.ElicitResult { return approveIt }}
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, q.options())
	res := rawCall(t, cs, "hold", `{"guest":"x' OR 1=1 --"}`, false)
	want := "not asked by elicitation: call c-1 (hold) waits on the tool's own question (interrupt), which is for a reviewer, not for this client's user; an operator decides: toolgate approve mcp-alice-r c-1"
	if !res.IsError || res.Meta[MetaStatus] != StatusWaiting || res.Meta[MetaNote] != want {
		t.Fatalf("answer %q, meta %v; want waiting, noting %q", resultText(res), res.Meta, want)
	}
	if a := q.all(); len(a) != 0 || len(h.runs.decided()) != 0 {
		t.Fatalf("asked %q, decided %v: want nobody asked", a, h.runs.decided())
	}
}

// Each wait is asked once per open request: a question the user dismissed
// is not asked again. A call asked anew (a later requested_at, as after a
// rewind) is asked again, shown whole again, once the earlier question is
// withdrawn.
func TestElicitOncePerWait(t *testing.T) {
	t.Run("dismissed", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.ElicitApprovals = true; o.Wait = 1500 * time.Millisecond })
		q := &questions{answer: func(int, string) *mcp.ElicitResult { return &mcp.ElicitResult{Action: "cancel"} }}
		cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, q.options())
		res := rawCall(t, cs, "close", `{"id":"TKT-3"}`, false)
		if !res.IsError || res.Meta[MetaStatus] != StatusWaiting || len(q.all()) != 1 {
			t.Fatalf("answer %q, asked %d times; want still waiting, asked once", resultText(res), len(q.all()))
		}
	})
	t.Run("asked anew", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.ElicitApprovals = true; o.Wait = 10 * time.Second })
		q := &questions{}
		withdrawn, over := make(chan struct{}), make(chan struct{})
		co := q.options()
		ask := co.ElicitationHandler
		co.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if res, _ := ask(ctx, req); res != nil {
				return res, nil
			}
			if len(q.all()) == 1 { // the first question: the call is asked anew meanwhile
				h.runs.askAnew(WorkflowID("alice", "r"), "c-1")
				select {
				case <-ctx.Done(): // withdrawn by the server
					close(withdrawn)
					return nil, ctx.Err()
				case <-over:
					return &mcp.ElicitResult{Action: "cancel"}, nil
				}
			}
			select { // the second: approve once the first is withdrawn
			case <-withdrawn:
				return approveIt, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-over:
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
		}
		q.answer = func(int, string) *mcp.ElicitResult { return nil }
		cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, co)
		t.Cleanup(func() { close(over) }) // before the session closes
		res := rawCall(t, cs, "close", `{"id":"TKT-3"}`, false)
		asked := q.all()
		if res.IsError || len(asked) != 2 || asked[0] != asked[1] || !strings.Contains(asked[1], `{"id":"TKT-3"}`) {
			t.Fatalf("answer %q, asked %q; want approved on the second question, the same whole call as the first", resultText(res), asked)
		}
	})
}

// showJSON escapes every rune that might not be seen as itself, keeps every
// other, and stays JSON of the same value.
func TestShowJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ok\u202egnp.exe", `ok\u202egnp.exe`},                 // right-to-left override
		{"TKT\u200b-2\u200d\ufeff", `TKT\u200b-2\u200d\ufeff`}, // zero-width space, joiner, BOM
		{"a\u2028b\u2029c", `a\u2028b\u2029c`},                 // line and paragraph separators
		{"a\u00a0b\u3000c", `a\u00a0b\u3000c`},                 // spaces that are not U+0020
		{"x\u007f\u0085y", `x\u007f\u0085y`},                   // DEL, a C1 control
		{"\U000e0041tag", `\udb40\udc41tag`},                   // a tag character (Cf) above U+FFFF
		{"\ufe0f\u3164\ue000", `\ufe0f\u3164\ue000`},           // a variation selector, a Hangul filler, private use
		{"```end", `\u0060\u0060\u0060end`},                    // the backtick, which would end a code block
		{"café 日本 😀 a b", "café 日本 😀 a b"},                     // what prints stays
	} {
		raw, err := json.Marshal(map[string]string{"s": c.in})
		if err != nil {
			t.Fatal(err)
		}
		canon, err := tool.Canonical(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := showJSON(canon)
		if want := `{"s":"` + c.want + `"}`; got != want {
			t.Errorf("showJSON(%q) = %s, want %s", c.in, got, want)
		}
		var back map[string]string
		if err := json.Unmarshal([]byte(got), &back); err != nil || !reflect.DeepEqual(back, map[string]string{"s": c.in}) {
			t.Errorf("showJSON(%q) = %s reads back as %q (%v)", c.in, got, back, err)
		}
	}
}
