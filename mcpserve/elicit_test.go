package mcpserve

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/workflows"
)

// elicitingClient answers every elicitation with content (nil: decline),
// and counts the questions.
func elicitingClient(asked *atomic.Int32, content map[string]any) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		if content == nil {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: content}, nil
	}}
}

// With the operator's consent, a waiting call is put to the client's user,
// whose "yes" is sent as a decision recorded under elicitation:<caller>,
// bound to the call's args_digest and kind.
func TestElicitedApproval(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ElicitApprovals = true; o.Wait = 5 * time.Second })
	var asked atomic.Int32
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, elicitingClient(&asked, map[string]any{"approve": true}))
	res := call(t, cs, "close", map[string]string{"id": "TKT-3"}, nil)
	if res.IsError || !strings.Contains(resultText(res), "closed") {
		t.Fatalf("the call after the client's user approved: %+v %s", res, resultText(res))
	}
	if asked.Load() != 1 {
		t.Fatalf("asked %d times, want once", asked.Load())
	}
	d := h.runs.decided()
	if len(d) != 1 || d[0].Approver != "elicitation:alice" || d[0].CallID != "c-1" || d[0].Kind != workflows.KindGate || d[0].ArgsDigest == "" {
		t.Fatalf("decisions %+v, want one of c-1 by elicitation:alice, bound to its digest and kind", d)
	}
}

// A "no" from the client's user is a rejection, with the user's reason, or
// a default one when they declined.
func TestElicitedRejection(t *testing.T) {
	for _, c := range []struct {
		content map[string]any
		want    string
	}{
		{map[string]any{"approve": false, "reason": "wrong ticket"}, "wrong ticket"},
		{nil, "declined by alice's user"},
	} {
		h := newHarness(t, func(o *Options) { o.ElicitApprovals = true; o.Wait = 5 * time.Second })
		var asked atomic.Int32
		cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, elicitingClient(&asked, c.content))
		res := call(t, cs, "close", map[string]string{"id": "TKT-3"}, nil)
		if !res.IsError || !strings.Contains(resultText(res), c.want) {
			t.Fatalf("%v: %+v %s, want a rejection saying %q", c.content, res, resultText(res), c.want)
		}
	}
}

// Without the operator's consent nobody is asked: the call waits for an
// operator. Under a policy the consent itself is refused.
func TestNoElicitationUnlessAllowed(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Wait = 400 * time.Millisecond })
	var asked atomic.Int32
	cs := h.connect(t, h.alice, map[string]string{HeaderRun: "r"}, elicitingClient(&asked, map[string]any{"approve": true}))
	res := call(t, cs, "close", map[string]string{"id": "TKT-3"}, nil)
	if !res.IsError || !strings.Contains(resultText(res), "waits for a human") || asked.Load() != 0 || len(h.runs.decided()) != 0 {
		t.Fatalf("without --approve-by-elicitation: %s (asked %d, decisions %v), want the call still waiting, nobody asked",
			resultText(res), asked.Load(), h.runs.decided())
	}
	if _, err := New(Options{Runs: newFakeRuns(), Tools: testTools, Policy: true, ElicitApprovals: true}); err == nil ||
		!strings.Contains(err.Error(), "refused under a policy") {
		t.Fatalf("elicitation approvals with a policy: %v, want refused", err)
	}
}
