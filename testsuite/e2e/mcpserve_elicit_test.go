package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/mcpserve"
	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// elicited keeps every question the client's user is asked; the user
// declines c-3's (whose characters it checks), approves those of c-1 and
// c-4 and dismisses any other (leaving it to the operator).
type elicited struct {
	mu       sync.Mutex
	asked    []string
	progress []string // the progress notifications' messages
}

func (e *elicited) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	e.mu.Lock()
	e.progress = append(e.progress, req.Params.Message)
	e.mu.Unlock()
}

// told reports whether a progress notification said msg.
func (e *elicited) told(msg string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.progress {
		if strings.Contains(m, msg) {
			return true
		}
	}
	return false
}

func (e *elicited) handler(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	e.asked = append(e.asked, req.Params.Message)
	e.mu.Unlock()
	if strings.Contains(req.Params.Message, "call c-3 ") {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": false, "reason": "it hides characters"}}, nil
	}
	if strings.Contains(req.Params.Message, "call c-1 ") || strings.Contains(req.Params.Message, "call c-4 ") {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}
	return &mcp.ElicitResult{Action: "cancel"}, nil
}

// about lists the questions that name call callID.
func (e *elicited) about(callID string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, q := range e.asked {
		if strings.Contains(q, "call "+callID+" ") {
			out = append(out, q)
		}
	}
	return out
}

// TestMCPServeElicitation: `toolgate mcp serve --approve-by-elicitation`
// on the embedded server, driven by the Go SDK's client with an elicitation
// handler. The user sees every byte approved, or is not asked:
//
//   - c-1, a 1,900-character resolution saying "Closing TKT-3" ahead of
//     ticket_id TKT-2, is asked with the canonical arguments whole (and
//     its args_digest), and closes TKT-2 once the user says yes;
//   - c-2, the same with 1,990 characters, does not fit a question whole: it
//     is not asked, an operator approves it, and the answer says why;
//   - c-3 hides a right-to-left override and a zero-width space: the
//     question shows both escaped, never raw;
//   - c-4, book_hotel with a guest that looks like SQL injection: the gate's
//     question is asked, the compliance hold that follows (the tool's own
//     question, for a reviewer) is not, and the answer says an operator
//     decides.
func TestMCPServeElicitation(t *testing.T) {
	t.Parallel()
	ms := newMCPStack(t, "alice", "--approve-by-elicitation")
	q := &elicited{}
	cs := mcpConnectWith(t, ms.m.url, ms.tok, "elicit", &mcp.ClientOptions{ElicitationHandler: q.handler, ProgressNotificationHandler: q.onProgress})
	id := mcpRunID("alice", "elicit")

	// c-1: shown whole, approved by the user.
	note := "Closing TKT-3. " + strings.Repeat("n", 1900-len("Closing TKT-3. "))
	args := `{"ticket_id":"TKT-2","resolution":"` + note + `"}`
	res, err := callTool(within(t, 2*waitTimeout), cs, "close_ticket", args, "")
	if err != nil || res.IsError || !strings.Contains(resultText(res), `"id":"TKT-2"`) {
		t.Fatalf("c-1 after the user approved: %v %s", err, resultTextOf(res))
	}
	digest := mustDigest(t, "close_ticket", args)
	if a := q.about("c-1"); len(a) != 1 || !strings.Contains(a[0], `{"resolution":"`+note+`","ticket_id":"TKT-2"}`) || !strings.Contains(a[0], "args_digest: "+digest) {
		t.Fatalf("c-1 was asked %q; want once, its arguments whole and args_digest %s", a, digest)
	}
	checkDecidedBy(t, ms.stack, id, "c-1", mcpserve.ElicitationApprover("alice"))

	// c-2: too long to show whole, so not asked; an operator decides.
	long := "Closing TKT-3. " + strings.Repeat("n", 1990-len("Closing TKT-3. "))
	longArgs := `{"ticket_id":"TKT-1","resolution":"` + long + `"}`
	done := callAsync(t, cs, "close_ticket", longArgs, "")
	ms.awaitWaiting(id, "c-2")
	ms.decide(id, "c-2", "")
	res = <-done
	want := fmt.Sprintf("not asked by elicitation: the arguments are %d bytes, more than the %d a question shows whole; an operator decides: toolgate approve %s c-2",
		len(`{"resolution":"","ticket_id":"TKT-1"}`)+len(long), mcpserve.MaxElicitArgsBytes, id)
	if res == nil || res.IsError || res.Meta[mcpserve.MetaNote] != want {
		t.Fatalf("c-2: %s, note %v; want it closed by the operator, noting %q", resultTextOf(res), metaOf(res), want)
	}
	if a := q.about("c-2"); len(a) != 0 {
		t.Fatalf("c-2 was asked %q; want not asked", a)
	}

	// c-3: what does not print is shown escaped; the user declines.
	res, err = callTool(within(t, 2*waitTimeout), cs, "close_ticket", "{\"ticket_id\":\"TKT-4\",\"resolution\":\"done\u202egnp.exe\u200b\"}", "") // the runes raw
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "it hides characters") {
		t.Fatalf("c-3: %v %s; want rejected by the user", err, resultTextOf(res))
	}
	if a := q.about("c-3"); len(a) != 1 || !strings.Contains(a[0], `"resolution":"done\u202egnp.exe\u200b"`) ||
		strings.ContainsAny(a[0], "\u202e\u200b") {
		t.Fatalf("c-3 was asked %q; want once, the override and the zero-width space escaped, neither raw", a)
	}

	// c-4: the gate's question is asked; the tool's own is not, and the
	// client is told (in progress notifications, then in the answer) that an
	// operator decides.
	booked := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "book_hotel", Arguments: json.RawMessage(`{"guest":"x' OR 1=1 --","hotel":"Grand","nights":1}`)}
		p.SetProgressToken("c-4")
		res, err := cs.CallTool(within(t, 2*waitTimeout), p)
		if err != nil {
			t.Errorf("book_hotel: %v", err)
		}
		booked <- res
	}()
	awaitKind(t, ms.stack, id, "c-4", workflows.KindInterrupt)
	want = fmt.Sprintf("not asked by elicitation: call c-4 (book_hotel) waits on the tool's own question (interrupt), which is for a reviewer, not for this client's user; an operator decides: toolgate approve %s c-4", id)
	testenv.Eventually(t, waitTimeout, "the client told an operator decides c-4", func() error {
		if q.told(want) {
			return nil
		}
		return errNotYet
	})
	ms.decide(id, "c-4", "")
	res = <-booked
	if res == nil || res.IsError || !strings.Contains(resultText(res), "booking_id") || res.Meta[mcpserve.MetaNote] != want {
		t.Fatalf("c-4: %s, note %v; want booked by the operator, noting %q", resultTextOf(res), metaOf(res), want)
	}
	if a := q.about("c-4"); len(a) != 1 || strings.Contains(a[0], "compliance") {
		t.Fatalf("c-4 was asked %q; want once, at the gate, never the compliance hold", a)
	}
}

// awaitKind waits until call callID of run id waits on a question of kind.
func awaitKind(t *testing.T, s *stack, id, callID string, kind tool.DecisionKind) {
	t.Helper()
	testenv.Eventually(t, waitTimeout, id+" "+callID+" waiting on "+string(kind), func() error {
		st, err := s.state(id)
		if err != nil {
			return err
		}
		for _, i := range st.Interrupts {
			if i.CallID == callID && i.Kind == kind {
				return nil
			}
		}
		return errNotYet
	})
}

// checkDecidedBy fails unless run id's trace says approver approved callID.
func checkDecidedBy(t *testing.T, s *stack, id, callID, approver string) {
	t.Helper()
	for _, r := range records(s.mustTrace(id), callID, workflows.TraceApproved) {
		if r.Approver == approver {
			return
		}
	}
	t.Fatalf("run %s: no approval of %s by %s in the trace", id, callID, approver)
}

func mustDigest(t *testing.T, toolName, args string) string {
	t.Helper()
	d, err := tool.Digest(toolName, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func resultTextOf(res *mcp.CallToolResult) string {
	if res == nil {
		return "<no result>"
	}
	return resultText(res)
}

func metaOf(res *mcp.CallToolResult) mcp.Meta {
	if res == nil {
		return nil
	}
	return res.Meta
}
