package nexusserve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// Every refusal of an operation's input says why; nothing is started.
func TestCallInputRefused(t *testing.T) {
	signedStart := `{"goal":"g","planner":{"kind":"external"},"request_token":"x.y.z"}`
	for _, c := range []struct {
		name   string
		opts   Options
		in     string
		reqID  string
		refuse string
	}{
		{"empty", Options{}, ``, "r", "no input"},
		{"not an object", Options{}, `[1]`, "r", "cannot unmarshal"},
		{"a typo", Options{}, `{"run":"a","tool":"t","idempotency_key":"k"}`, "r", `unknown field "idempotency_key"`},
		{"run name", Options{}, `{"run":"../a","tool":"t"}`, "r", `run name "../a": want 1 to 64 letters`},
		{"run name too long", Options{}, `{"run":"` + strings.Repeat("a", 65) + `","tool":"t"}`, "r", "want 1 to 64 letters"},
		{"no tool", Options{}, `{"run":"a"}`, "r", "tool is empty"},
		{"a long key", Options{}, `{"run":"a","tool":"t","key":"` + strings.Repeat("k", workflows.MaxKeyBytes+1) + `"}`, "r", "key has 201 bytes"},
		{"big arguments", Options{}, `{"run":"a","tool":"t","args":{"x":"` + strings.Repeat("a", workflows.MaxArgsBytes) + `"}}`, "r", "the arguments have"},
		{"no key, no request id", Options{}, `{"run":"a","tool":"t"}`, "", "no key"},
		{"policy, unsigned start", Options{Policy: true}, `{"run":"a","tool":"t","start":{"goal":"g","planner":{"kind":"external"}}}`, "r", "starts only signed by its requester"},
		{"a start of another planner", Options{}, `{"run":"a","tool":"t","start":{"goal":"g","planner":{"kind":"scripted"}}}`, "r", `the planner of a session run is "external"`},
		{"a start the run refuses", Options{}, `{"run":"a","tool":"t","start":{"goal":"g","planner":{"kind":"external"},"approval":"maybe"}}`, "r", "start:"},
		{"a carry", Options{}, `{"run":"a","tool":"t","start":{"goal":"g","planner":{"kind":"external"},"carry":{}}}`, "r", "start:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.opts.callRequest(json.RawMessage(c.in), c.reqID)
			if err == nil || !strings.Contains(err.Error(), c.refuse) {
				t.Fatalf("callRequest(%.80s) = %v, want an error saying %q", c.in, err, c.refuse)
			}
		})
	}
	// Under a policy, a call without a start goes only to a running run.
	req, err := Options{Policy: true}.callRequest(json.RawMessage(`{"run":"a","tool":"t"}`), "r")
	if err != nil || req.Start != nil || !req.NeedsSignedStart {
		t.Fatalf("no start under a policy: %+v, %v", req, err)
	}
	// A signed start is taken under a policy.
	req, err = Options{Policy: true}.callRequest(json.RawMessage(`{"run":"a","tool":"t","start":`+signedStart+`}`), "r")
	if err != nil || req.Start.RequestToken != "x.y.z" || req.NeedsSignedStart {
		t.Fatalf("a signed start: %+v, %v", req, err)
	}
}

// A call's key is the caller's, or the operation's request id; its run is
// under RunPrefix; arguments left out are {}; a run started for it is a
// session of the external planner with the service's idle timeout.
func TestCallRequest(t *testing.T) {
	o := Options{}
	req, err := o.callRequest(json.RawMessage(`{"run":"agent-1","tool":"search_tickets"}`), "req-7")
	if err != nil {
		t.Fatal(err)
	}
	if req.Run != "nexus-agent-1" || req.Proposal.Key != "nexus:req-7" || string(req.Proposal.Args) != "{}" {
		t.Fatalf("request %+v", req)
	}
	if req.Start == nil || req.Start.Planner.Kind != plan.KindExternal || req.Start.IdleTimeout != workflows.Duration(DefaultIdleTimeout) {
		t.Fatalf("start %+v", req.Start)
	}
	keyed, err := o.callRequest(json.RawMessage(`{"run":"agent-1","tool":"search_tickets","args":{"q":1},"key":"k-1"}`), "req-8")
	if err != nil || keyed.Proposal.Key != "k-1" {
		t.Fatalf("keyed %+v %v", keyed, err)
	}
	// One workflow per run, key, tool and arguments (their canonical
	// digest): the same call again shares it, another call with the key
	// gets its own, whose proposal the run refuses.
	again, _ := o.callRequest(json.RawMessage(`{"run":"agent-1","tool":"search_tickets","args":{ "q" : 1 },"key":"k-1"}`), "req-9")
	otherRun, _ := o.callRequest(json.RawMessage(`{"run":"agent-2","tool":"search_tickets","args":{"q":1},"key":"k-1"}`), "req-9")
	otherArgs, _ := o.callRequest(json.RawMessage(`{"run":"agent-1","tool":"search_tickets","args":{"q":2},"key":"k-1"}`), "req-9")
	otherTool, _ := o.callRequest(json.RawMessage(`{"run":"agent-1","tool":"close_ticket","args":{"q":1},"key":"k-1"}`), "req-9")
	if keyed.workflowID() != again.workflowID() {
		t.Fatalf("the same call, two workflow ids: %s %s", keyed.workflowID(), again.workflowID())
	}
	for _, o := range []CallRequest{otherRun, otherArgs, otherTool, req} {
		if o.workflowID() == keyed.workflowID() {
			t.Fatalf("%+v shares the workflow %s of %+v", o.Proposal, keyed.workflowID(), keyed.Proposal)
		}
		if !strings.HasPrefix(o.workflowID(), workflows.NotifyPrefix) {
			t.Fatalf("workflow id %s does not start with %s: the run would not signal it", o.workflowID(), workflows.NotifyPrefix)
		}
	}
}

func TestRunRequest(t *testing.T) {
	id, enc, err := Options{}.runRequest(json.RawMessage(`{"id":"r-1","input":{"goal":"g","planner":{"kind":"scripted","turns":[],"answer":"a"}}}`))
	if err != nil || id != "nexus-r-1" || !json.Valid(enc) {
		t.Fatalf("runRequest: %s %s %v", id, enc, err)
	}
	for in, refuse := range map[string]string{
		`{"id":"r 1","input":{"goal":"g"}}`:                               "want 1 to 64 letters",
		`{"id":"r-1","input":{"goal":"g","planner":{"kind":"nope"}}}`:     "input:",
		`{"id":"r-1","inputs":{}}`:                                        `unknown field "inputs"`,
		`{"id":"r-1","input":{"goal":"g","planner":{"kind":"scripted"}}}`: "",
	} {
		_, _, err := Options{Policy: refuse == ""}.runRequest(json.RawMessage(in))
		if refuse == "" {
			refuse = "starts only signed"
		}
		if err == nil || !strings.Contains(err.Error(), refuse) {
			t.Errorf("runRequest(%s) = %v, want an error saying %q", in, err, refuse)
		}
	}
}
