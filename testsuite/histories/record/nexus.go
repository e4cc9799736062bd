package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/nexusserve"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// The Nexus and remote-tool flows (rules version 10, issue #36).

const (
	fixtureEndpoint = "toolgate-fixture"
	callerQueue     = "fixture-nexus-caller"
	remoteQueue     = "fixture-remote-tools"
	// nexusRun is the name the caller gives the session run.
	nexusRun = "fixture"
	// The keys of the two closes the caller proposes: one approved, one
	// withdrawn when the caller cancels its operation.
	keyApproved  = "fixture-close-tkt-3"
	keyWithdrawn = "fixture-close-tkt-1"
)

// nexusFlow is a session run driven through toolgate's Nexus service by a
// caller's workflow: a search, the same search (a memo hit), a close that
// waits at the gate and is approved, and a second close whose operation the
// caller cancels while it waits (withdrawn); then the end signal. It also
// writes the histories of the two call workflows behind those closes
// (nexus_call: watched until it ran; nexus_withdrawn: cancelled, withdrawn).
func nexusFlow() flow {
	id := nexusserve.RunID(nexusRun)
	return flow{
		name: "nexus",
		id:   id,
		in:   workflows.RunInput{Goal: "Nexus session " + nexusRun, Planner: plan.Config{Kind: plan.KindExternal}, IdleTimeout: workflows.Duration(time.Hour)},
		setup: func(ctx context.Context, cl client.Client, opts *worker.Options) (func(), error) {
			svc, err := nexusserve.Start(cl, "", nexusserve.Options{Runs: tgclient.New(cl)})
			if err != nil {
				return nil, err
			}
			if _, err := nexusserve.CreateEndpoint(ctx, cl, fixtureEndpoint, "default", nexusserve.TaskQueue); err != nil {
				svc.Stop()
				return nil, err
			}
			w := sdkworker.New(cl, callerQueue, sdkworker.Options{})
			w.RegisterWorkflowWithOptions(fixtureCaller, workflow.RegisterOptions{Name: "fixtureCaller"})
			if err := w.Start(); err != nil {
				svc.Stop()
				return nil, err
			}
			return func() { w.Stop(); svc.Stop() }, nil
		},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			caller, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "fixture-nexus-caller", TaskQueue: callerQueue}, "fixtureCaller")
			if err != nil {
				return err
			}
			if err := decideByUpdate(ctx, cl, id, "c-3", workflows.KindGate, workflows.UpdateApprove, "alice", ""); err != nil {
				return err
			}
			if _, err := waitPending(ctx, cl, id, "c-4", workflows.KindGate); err != nil {
				return err
			}
			if err := cl.SignalWorkflow(ctx, caller.GetID(), "", "cancel", nil); err != nil {
				return err
			}
			var got string
			if err := caller.Get(ctx, &got); err != nil {
				return fmt.Errorf("the caller's workflow: %w", err)
			}
			if got != "c-1 ok, c-2 cache_hit, c-3 ok, c-4 cancelled" {
				return fmt.Errorf("the caller's workflow saw %q", got)
			}
			return cl.SignalWorkflow(ctx, id, "", workflows.SignalEnd, struct{}{})
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 approved", "c-3 ok", "c-4 blocked", "c-4 cancelled"},
		extra: func(ctx context.Context, cl client.Client, _ *signers, file func(string) string) ([]string, error) {
			var files []string
			withdrawn := workflows.Proposal{Tool: "close_ticket", Args: json.RawMessage(`{"ticket_id":"TKT-1"}`), Key: keyWithdrawn}
			approved := workflows.Proposal{Tool: closeTKT3.Tool, Args: closeTKT3.Args, Key: keyApproved}
			for base, p := range map[string]workflows.Proposal{"nexus_call": approved, "nexus_withdrawn": withdrawn} {
				f := file(base)
				if err := export(ctx, cl, nexusserve.CallWorkflowID(id, p), "", f); err != nil {
					return nil, fmt.Errorf("%s: %w", base, err)
				}
				files = append(files, f)
			}
			return files, nil
		},
	}
}

// fixtureCaller is the workflow of another team that drives the nexus flow,
// through the endpoint: it returns what each call ended as.
func fixtureCaller(ctx workflow.Context) (string, error) {
	c := workflow.NewNexusClient(fixtureEndpoint, nexusserve.ServiceName)
	opts := workflow.NexusOperationOptions{ScheduleToCloseTimeout: time.Minute}
	call := func(ctx workflow.Context, toolName, args, key string) (nexusserve.CallOutput, error) {
		var out nexusserve.CallOutput
		in := nexusserve.CallInput{Run: nexusRun, Tool: toolName, Args: json.RawMessage(args), Key: key}
		err := c.ExecuteOperation(ctx, nexusserve.OperationCall, in, opts).Get(ctx, &out)
		return out, err
	}
	var seen []string
	for _, k := range []string{"", "", keyApproved} {
		toolName, args := searchLogin.Tool, string(searchLogin.Args)
		if k != "" {
			toolName, args = closeTKT3.Tool, string(closeTKT3.Args)
		}
		out, err := call(ctx, toolName, args, k)
		if err != nil {
			return "", err
		}
		seen = append(seen, out.CallID+" "+out.Status)
	}
	// The second close, cancelled by the caller while it waits.
	done := workflow.NewChannel(ctx)
	var err error
	var cancel workflow.CancelFunc
	workflow.Go(ctx, func(ctx workflow.Context) {
		ctx, cancel = workflow.WithCancel(ctx)
		_, err = call(ctx, "close_ticket", `{"ticket_id":"TKT-1"}`, keyWithdrawn)
		done.Send(ctx, true)
	})
	workflow.GetSignalChannel(ctx, "cancel").Receive(ctx, nil)
	cancel()
	done.Receive(ctx, nil)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		return "", fmt.Errorf("the cancelled close ended %v, want cancelled", err)
	}
	seen = append(seen, "c-4 cancelled")
	return strings.Join(seen, ", "), nil
}

// remoteFlow is a run that calls tools another worker hosts on its own task
// queue (a tools file's, declared on the toolgate worker): a read twice (a
// memo hit), and a destructive refund held at the gate and approved, which
// that worker runs with the call's idempotency key.
func remoteFlow() flow {
	refund := proposal("refund_remote", `{"order":"O-1","amount":30}`)
	status := proposal("order_status_remote", `{"order":"O-1"}`)
	return flow{
		name: "remote",
		in: workflows.RunInput{Goal: "refund order O-1", Planner: scripted("refunded O-1",
			[]tool.Proposal{status}, []tool.Proposal{status}, []tool.Proposal{refund})},
		setup: func(ctx context.Context, cl client.Client, opts *worker.Options) (func(), error) {
			opts.Tools = append(opts.Tools,
				tool.Tool{Spec: tool.Spec{Name: "refund_remote", Description: "Refund an order (hosted elsewhere)", TaskQueue: remoteQueue, Destructive: true,
					Timeout: 10 * time.Second, Retry: tool.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second}}},
				tool.Tool{Spec: tool.Spec{Name: "order_status_remote", Description: "Read an order (hosted elsewhere)", TaskQueue: remoteQueue,
					Activity: "order_status", Timeout: 10 * time.Second}})
			// The host checks each request's permit (permit.Guard) against
			// the worker's public key, as a host given DATA/worker.pub does.
			if opts.WorkerKey == nil {
				return nil, errors.New("the remote flow needs the worker's key: its tools' host checks the permits it signs")
			}
			v := permit.NewHostVerifier(permit.NewKeys(opts.WorkerKey.Public().(ed25519.PublicKey)))
			w := sdkworker.New(cl, remoteQueue, sdkworker.Options{})
			w.RegisterActivityWithOptions(permit.Guard(v, func(_ context.Context, req tool.Request) (map[string]any, error) {
				return map[string]any{"refund_id": "R-1", "idempotency_key": req.IdempotencyKey}, nil
			}), activity.RegisterOptions{Name: "refund_remote"})
			w.RegisterActivityWithOptions(permit.Guard(v, func(_ context.Context, req tool.Request) (map[string]any, error) {
				return map[string]any{"order": "O-1", "status": "delivered"}, nil
			}), activity.RegisterOptions{Name: "order_status"})
			if err := w.Start(); err != nil {
				return nil, err
			}
			return w.Stop, nil
		},
		drive: func(ctx context.Context, cl client.Client, id string) error {
			return decideByUpdate(ctx, cl, id, "c-3", workflows.KindGate, workflows.UpdateApprove, "alice", "")
		},
		status: workflows.StatusCompleted,
		trace:  []string{"c-1 ok", "c-2 cache_hit", "c-3 blocked", "c-3 approved", "c-3 ok"},
	}
}
