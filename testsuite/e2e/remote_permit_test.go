package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// Tools on other task queues, in Go or another language, check the permit
// too (issue 43): an attacker with a Temporal client of the namespace and no
// worker key schedules a tool's activity on its host's task queue from a
// workflow of its own — without a permit, with one it signed itself for that
// very activity, with one copied out of a real run's history — and the host
// refuses each before the tool has any effect.

// hostAttackQueue is the attacker's own task queue for these attacks.
const hostAttackQueue = "attacker-hosts"

// hostAttack is what the attacker's workflow schedules: Activity on Queue
// with Req, once. With ForgeKey (an Ed25519 private key), it first signs a
// permit for that very activity — its workflow, run, activity id, type,
// queue, call, arguments, key and approval — with that key; with ForgeKid
// too, the permit names that key id (a key the host trusts) instead of its
// own: only the signature is wrong.
type hostAttack struct {
	Queue, Activity string
	Req             tool.Request
	ForgeKey        []byte
	ForgeKid        string
}

// forgePermit signs c as a permit with priv, naming key id kid, by hand
// (permit.Sign names priv's own).
func forgePermit(priv ed25519.PrivateKey, c permit.Claims, kid string) (string, error) {
	c.Version, c.KeyID = permit.Version, kid
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"`+permit.Type+`"}`)) + "." + enc.EncodeToString(payload)
	return signing + "." + enc.EncodeToString(ed25519.Sign(priv, []byte(signing))), nil
}

func attackHost(ctx workflow.Context, a hostAttack) (json.RawMessage, error) {
	if a.ForgeKey != nil {
		info := workflow.GetInfo(ctx)
		digest, err := tool.Digest(a.Activity, a.Req.Args)
		if err != nil {
			return nil, err
		}
		c := permit.Claims{ID: permit.IDFor(info.WorkflowExecution.ID, info.WorkflowExecution.RunID, a.Req.CallID),
			WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityID: a.Req.CallID,
			Activity: a.Activity, TaskQueue: a.Queue, CallID: a.Req.CallID, Tool: a.Activity, ArgsDigest: digest,
			Key: a.Req.IdempotencyKey, Destructive: true, Rules: "mine", IssuedAt: 1}
		if ap := a.Req.Approval; ap != nil {
			c.Approver, c.Kind = ap.Approver, string(ap.Kind)
		}
		if a.ForgeKid != "" {
			a.Req.Permit, err = forgePermit(ed25519.PrivateKey(a.ForgeKey), c, a.ForgeKid)
		} else {
			a.Req.Permit, err = permit.Sign(ed25519.PrivateKey(a.ForgeKey), c)
		}
		if err != nil {
			return nil, err
		}
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: a.Queue, ActivityID: a.Req.CallID, StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out json.RawMessage
	err := workflow.ExecuteActivity(ctx, a.Activity, a.Req).Get(ctx, &out)
	return out, err
}

// startHostAttacker starts the attacker's worker on its own task queue.
func (s *stack) startHostAttacker() {
	s.t.Helper()
	w := sdkworker.New(s.client, hostAttackQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(attackHost, workflow.RegisterOptions{Name: "attack-host"})
	if err := w.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(w.Stop)
}

// runHostAttack runs the attacker's workflow id and returns the activity's
// failure; it fails the test if the tool ran.
func (s *stack) runHostAttack(id string, a hostAttack) error {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: hostAttackQueue}, "attack-host", a)
	if err != nil {
		s.t.Fatal(err)
	}
	var out json.RawMessage
	if err := run.Get(ctx, &out); err != nil {
		return err
	}
	s.t.Fatalf("%s on %s ran for the attacker: %s", a.Activity, a.Queue, out)
	return nil
}

// workerPub is the worker's public key file in the stack's data directory
// (written when a worker on it first loads its key): what a host of its
// tools trusts.
func (s *stack) workerPub() string {
	return filepath.Join(s.dataDir, permit.WorkerPublicKeyFile)
}

// workerKeyID is the id of the worker key in the stack's data directory.
func (s *stack) workerKeyID() string {
	s.t.Helper()
	keys, err := permit.ReadPublicKeys(s.workerPub())
	if err != nil {
		s.t.Fatal(err)
	}
	for kid := range keys {
		return kid
	}
	return ""
}

// A Go worker hosting refund_remote on its own task queue, every tool wrapped
// in permit.Guard over the worker's public key file: the attacker's requests
// are refused — no permit, a permit bound to the attacker's activity but
// signed with the attacker's key (naming it, or the worker's), the permit of a real run's approved refund
// copied into the attacker's workflow, as it was and with other arguments —
// and only the real run's refund is paid.
func TestRemoteToolHostRefusesACallNoGateLetThrough(t *testing.T) {
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) {
		o.Tools = append(o.Tools, tool.Tool{Spec: tool.Spec{Name: "refund_remote", TaskQueue: remoteQueue, Destructive: true,
			Timeout: 5 * time.Second, Retry: tool.RetryPolicy{MaxAttempts: 3, InitialInterval: 200 * time.Millisecond}}})
	})
	h := &refundHost{paid: map[string]string{}, attempts: map[string]int{}, hang: make(chan struct{})}
	close(h.hang) // no attempt hangs here
	defer h.start(s).Stop()
	s.startHostAttacker()

	req := tool.Request{CallID: "c-1", IdempotencyKey: "mine/c-1", Args: json.RawMessage(`{"order":"O-9"}`),
		Approval: &tool.Approval{Approver: "alice", Kind: tool.ApprovedAtGate}}
	err := s.runHostAttack("attack-host-none", hostAttack{Queue: remoteQueue, Activity: "refund_remote", Req: req})
	requirePermitRefused(t, err, "carries no permit")
	_, mallory, err := signed.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	err = s.runHostAttack("attack-host-forged", hostAttack{Queue: remoteQueue, Activity: "refund_remote", Req: req, ForgeKey: mallory})
	requirePermitRefused(t, err, "not one this worker trusts")
	err = s.runHostAttack("attack-host-forged-kid", hostAttack{Queue: remoteQueue, Activity: "refund_remote", Req: req, ForgeKey: mallory, ForgeKid: s.workerKeyID()})
	requirePermitRefused(t, err, "bad permit signature")

	// A real run's approved refund runs on the host, with its permit.
	id := "remote-permit-real"
	s.start(id, workflows.RunInput{Goal: "refund order O-1", Planner: scripted("done", step(call("refund_remote", `{"order":"O-1"}`)))})
	s.decideWaiting(id, "gate:refund_remote", "c-1", true)
	if res := s.result(id, waitTimeout); res.Status != workflows.StatusCompleted {
		t.Fatalf("the real run: %+v", res)
	}
	copied := s.scheduledRequest(id, "c-1")
	if copied.Permit == "" {
		t.Fatal("the real run's refund carries no permit")
	}
	err = s.runHostAttack("attack-host-copy", hostAttack{Queue: remoteQueue, Activity: "refund_remote", Req: copied})
	requirePermitRefused(t, err, `its workflow is "remote-permit-real"`)
	copied.Args = json.RawMessage(`{"order":"O-9"}`)
	err = s.runHostAttack("attack-host-copy-edited", hostAttack{Queue: remoteQueue, Activity: "refund_remote", Req: copied})
	requirePermitRefused(t, err, `its workflow is "remote-permit-real"`)

	h.mu.Lock()
	defer h.mu.Unlock()
	if want := s.key(id, "c-1"); len(h.paid) != 1 || h.paid[want] != "R-c-1" {
		t.Fatalf("paid %v, want the real run's refund only, under its key %q", h.paid, want)
	}
}
