package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/workflows"
)

// externalFlow is a run whose planner is external, as toolgate's MCP server
// drives it: calls proposed through the propose update — a search, the same
// search again (a memo hit), a close that waits at the gate, approved by
// update, and the close proposed again with its key (attached: it never
// runs twice) — then the end signal.
func externalFlow() flow {
	return flow{
		name: "external",
		in:   workflows.RunInput{Goal: "MCP session fixture/external", Planner: plan.Config{Kind: plan.KindExternal}, IdleTimeout: workflows.Duration(time.Hour)},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			tg := tgclient.New(cl)
			propose := func(p workflows.Proposal, want func(workflows.CallStatus) bool) error {
				st, err := tg.Propose(ctx, id, nil, p)
				if err != nil {
					return fmt.Errorf("proposing %s: %w", p.Tool, err)
				}
				if !want(st) {
					return fmt.Errorf("proposing %s: %+v", p.Tool, st)
				}
				return nil
			}
			done := func(status string) func(workflows.CallStatus) bool {
				return func(st workflows.CallStatus) bool { return st.Done && st.Status == status }
			}
			search := workflows.Proposal{Tool: searchLogin.Tool, Args: searchLogin.Args}
			closeIt := workflows.Proposal{Tool: closeTKT3.Tool, Args: json.RawMessage(closeTKT3.Args), Key: "close-tkt-3"}
			if err := propose(search, done(workflows.TraceOK)); err != nil {
				return err
			}
			if err := propose(search, done(workflows.TraceCacheHit)); err != nil {
				return err
			}
			if err := propose(closeIt, func(st workflows.CallStatus) bool { return st.Waiting != nil && st.CallID == "c-3" }); err != nil {
				return err
			}
			if err := decideByUpdate(ctx, cl, id, "c-3", workflows.KindGate, workflows.UpdateApprove, "alice", ""); err != nil {
				return err
			}
			for {
				st, err := tg.Call(ctx, id, "c-3")
				if err != nil {
					return err
				}
				if st.Done {
					break
				}
				time.Sleep(50 * time.Millisecond) // polling the call query, as the MCP server does
			}
			if err := propose(closeIt, func(st workflows.CallStatus) bool { return st.Attached && done(workflows.TraceOK)(st) }); err != nil {
				return err
			}
			return cl.SignalWorkflow(ctx, id, "", workflows.SignalEnd, struct{}{})
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 approved", "c-3 ok"},
	}
}
