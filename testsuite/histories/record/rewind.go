package main

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/authority"
	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The rewound and forked flows (rules version 7) run under fixturePolicy
// with dave's role ops as its operators: dave signs the rewind and the
// fork, alice (support) approves the closes.

// rewindSteps: search, then close TKT-3 (destructive: held at the gate).
var rewindSteps = [][]tool.Proposal{{searchLogin}, {closeTKT3}}

// withAuthority gives the flow's worker the server's authority namespace,
// as toolgate dev's worker has it.
func withAuthority(_ context.Context, cl client.Client, opts *worker.Options) (func(), error) {
	ns := authority.Namespace(devserver.DefaultNamespace)
	ac, err := client.NewClientFromExisting(cl, client.Options{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("a client of the authority namespace %s: %w", ns, err)
	}
	opts.Authority = &authority.Conn{Client: ac, Namespace: ns}
	return func() {}, nil
}

// rewoundFlow: close TKT-3 approved by alice and run; dave rewinds the run
// to just before c-2's step (a reset, his signed rewind note); c-2 waits
// again, alice approves it again, the run completes. The history written is
// the new run's: the events before the reset point, the reset's
// WorkflowTaskFailed, the rewound signal, the rest.
func rewoundFlow() flow {
	return flow{
		name:        "rewound",
		in:          workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("closed TKT-3", rewindSteps...)},
		setup:       withAuthority, // rules version 14: the worker records the rewind there
		policy:      true,
		operators:   true,
		signedDrive: aliceApprovesC2,
		then: func(ctx context.Context, cl client.Client, id string, s *signers) (string, string, workflows.RunResult, error) {
			var res workflows.RunResult
			tg := tgclient.New(cl)
			p, err := tg.RewindPreview(ctx, id, "c-2")
			if err != nil {
				return "", "", res, err
			}
			rw, err := tg.Rewind(ctx, id, "c-2", p.Digest, tgclient.Operator{Name: "dave", Key: s.keys["dave"]})
			if err != nil {
				return "", "", res, err
			}
			ok, err := s.decideSigned(ctx, cl, id, "c-2", signed.ActionApprove, "alice", nil)
			if err := wantDecision(ok, err, workflows.TraceApproved); err != nil {
				return "", "", res, err
			}
			if err := cl.GetWorkflow(ctx, id, rw.RunID).Get(ctx, &res); err != nil {
				return "", "", res, err
			}
			return id, rw.RunID, res, nil
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-1 ok", "c-2 blocked", "c-2 rewound", "c-2 approved", "c-2 ok"},
		unordered: true, // the note may reach the new run before or after its first task holds c-2
		approvers: []string{"alice"},
	}
}

// forkedFlow: a completed run (search, close TKT-3 approved by alice) forked
// by dave at c-2 with TKT-1 in TKT-3's place; the fork's c-2 waits at the
// gate, alice approves it, the fork completes. The history written is the
// fork's (fixture-forked; its source is fixture-forked-source).
func forkedFlow() flow {
	return flow{
		name:        "forked",
		id:          "fixture-forked-source",
		in:          workflows.RunInput{Goal: "find the login ticket and close it", Planner: scripted("closed", rewindSteps...)},
		policy:      true,
		operators:   true,
		signedDrive: aliceApprovesC2,
		then: func(ctx context.Context, cl client.Client, id string, s *signers) (string, string, workflows.RunResult, error) {
			var res workflows.RunResult
			const fork = "fixture-forked"
			run, err := tgclient.New(cl).Fork(ctx, id, "c-2", fork, json.RawMessage(`{"ticket_id":"TKT-1"}`), tgclient.Operator{Name: "dave", Key: s.keys["dave"]})
			if err != nil {
				return "", "", res, err
			}
			ok, err := s.decideSigned(ctx, cl, fork, "c-2", signed.ActionApprove, "alice", nil)
			if err := wantDecision(ok, err, workflows.TraceApproved); err != nil {
				return "", "", res, err
			}
			if err := run.Get(ctx, &res); err != nil {
				return "", "", res, fmt.Errorf("the fork: %w", err)
			}
			return fork, run.GetRunID(), res, nil
		},
		status:    workflows.StatusCompleted,
		trace:     []string{"c-2 forked", "c-2 blocked", "c-2 approved", "c-2 ok"},
		approvers: []string{"alice"},
	}
}

// aliceApprovesC2 is how both flows' source run goes: alice approves c-2.
func aliceApprovesC2(ctx context.Context, cl client.Client, id string, s *signers) error {
	res, err := s.decideSigned(ctx, cl, id, "c-2", signed.ActionApprove, "alice", nil)
	return wantDecision(res, err, workflows.TraceApproved)
}
