package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// testTools are a read (search), a destructive call (close) that drops the
// read's memo, and a destructive one declared without a description.
var testTools = []tool.Spec{
	{Name: "search", Description: "search tickets", Schema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
	{Name: "close", Description: "close a ticket", Destructive: true, Invalidates: []string{"search"},
		Schema: json.RawMessage(`{"properties":{"id":{"type":"string"}}}`)},
	{Name: "note", Invalidates: []string{"search"}},
}

// fakeRuns is an in-memory stand-in for the runs: a read is done ok, the
// same read again cache_hit; a destructive call waits until approve; the
// first busy proposals are refused with ErrBusy; err, if set, refuses all.
type fakeRuns struct {
	mu        sync.Mutex
	calls     map[string]*workflows.CallStatus // id/callID
	order     map[string]int                   // calls per run
	reads     map[string]bool                  // id/tool/args read before
	busy      int
	err       error
	proposals []workflows.Proposal
	ids       []string
	starts    []*workflows.RunInput
	queries   int
	decisions []workflows.DecisionInput // what Decide took
	changed   chan struct{}             // a call was proposed
}

func newFakeRuns() *fakeRuns {
	return &fakeRuns{calls: map[string]*workflows.CallStatus{}, order: map[string]int{}, reads: map[string]bool{}, changed: make(chan struct{}, 100)}
}

func (f *fakeRuns) Propose(ctx context.Context, id string, start *workflows.RunInput, p workflows.Proposal, _ ...client.StartOption) (workflows.CallStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}()
	f.proposals = append(f.proposals, p)
	f.ids = append(f.ids, id)
	f.starts = append(f.starts, start)
	if f.err != nil {
		return workflows.CallStatus{}, f.err
	}
	if f.busy > 0 {
		f.busy--
		return workflows.CallStatus{}, &client.Error{Kind: client.ErrBusy, Msg: "proposal refused for now: run " + id + " is continuing as new"}
	}
	digest, _ := tool.Digest(p.Tool, p.Args)
	for _, c := range f.calls {
		if (p.Key != "" && c.Key == p.Key) || (p.Key == "" && !c.Done && c.Tool == p.Tool && c.ArgsDigest == digest) {
			st := *c
			st.Attached = true
			return st, nil
		}
	}
	f.order[id]++
	c := &workflows.CallStatus{ExternalCall: workflows.ExternalCall{CallID: fmt.Sprintf("c-%d", f.order[id]), Key: p.Key, Tool: p.Tool, ArgsDigest: digest}}
	f.calls[id+"/"+c.CallID] = c
	switch p.Tool {
	case "search":
		c.Done, c.Status, c.Result = true, "ok", json.RawMessage(`{"tickets":[{"id":"TKT-3"}],"args":`+string(p.Args)+`}`)
		if f.reads[id+"/"+string(p.Args)] {
			c.Status = "cache_hit"
		}
		f.reads[id+"/"+string(p.Args)] = true
	case "close":
		c.Waiting = &workflows.Interrupt{CallID: c.CallID, Tool: p.Tool, CallArgs: p.Args, ArgsDigest: digest, Kind: workflows.KindGate, RequestedAt: time.Now()}
	case "hold": // a tool that asks a reviewer its own question (a compliance hold)
		c.Waiting = &workflows.Interrupt{CallID: c.CallID, Tool: p.Tool, CallArgs: p.Args, ArgsDigest: digest, Kind: workflows.KindInterrupt,
			Reason: "compliance: looks like SQL injection", RequestedAt: time.Now()}
	default:
		c.Done, c.Status, c.Error = true, "error", fmt.Sprintf("unknown tool %q", p.Tool)
	}
	return *c, nil
}

func (f *fakeRuns) Call(ctx context.Context, id, callID string) (workflows.CallStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries++
	c, ok := f.calls[id+"/"+callID]
	if !ok {
		return workflows.CallStatus{}, &client.Error{Kind: client.ErrUnknownCall, Msg: "no call " + callID}
	}
	return *c, nil
}

// decide approves (reason "") or rejects the waiting call callID of run id.
func (f *fakeRuns) decide(id, callID, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.calls[id+"/"+callID]
	if !ok || c.Done {
		return fmt.Errorf("no waiting call %s/%s", id, callID)
	}
	c.Waiting, c.Done = nil, true
	if reason != "" {
		c.Status, c.Error = "rejected", "rejected by alice: "+reason
	} else {
		c.Status, c.Result = "ok", json.RawMessage(`{"id":"TKT-3","status":"closed"}`)
	}
	return nil
}

// askAnew has call callID of run id wait anew (as after a rewind): the same
// question, a later requested_at.
func (f *fakeRuns) askAnew(id, callID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.calls[id+"/"+callID]; c != nil && c.Waiting != nil {
		w := *c.Waiting
		w.RequestedAt = w.RequestedAt.Add(time.Second)
		c.Waiting = &w
	}
}

// waitingCall waits until run id has a call waiting for a human and says which.
func (f *fakeRuns) waitingCall(ctx context.Context, id string) (string, error) {
	for {
		f.mu.Lock()
		for k, c := range f.calls {
			if c.Waiting != nil && k == id+"/"+c.CallID {
				f.mu.Unlock()
				return c.CallID, nil
			}
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("run %s has no waiting call: %w", id, ctx.Err())
		case <-f.changed:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (f *fakeRuns) proposed() ([]string, []workflows.Proposal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...), append([]workflows.Proposal(nil), f.proposals...)
}

// Decide takes a decision as the run would: approve or reject a waiting call.
func (f *fakeRuns) Decide(ctx context.Context, id string, approve bool, in workflows.DecisionInput, opts ...client.DecideOption) (workflows.DecisionResult, error) {
	f.mu.Lock()
	f.decisions = append(f.decisions, in)
	f.mu.Unlock()
	reason := ""
	if !approve {
		reason = in.Reason
	}
	if err := f.decide(id, in.CallID, reason); err != nil {
		return workflows.DecisionResult{}, &client.Error{Kind: client.ErrAlreadyDecided, Msg: err.Error()}
	}
	return workflows.DecisionResult{CallID: in.CallID, Decision: map[bool]string{true: "approved", false: "rejected"}[approve], Approver: in.Approver}, nil
}

func (f *fakeRuns) decided() []workflows.DecisionInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]workflows.DecisionInput(nil), f.decisions...)
}
