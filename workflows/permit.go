package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/tool"
)

// This file asks the worker for a call's permit (rules version 11): the
// proof the tool's activity checks before it runs (package permit). The run
// says which call, which activity and which decision; the worker — in a
// local activity, which only the worker whose workflow task this is can run
// — compares the rules the run was held to with its own and signs with a key
// only workers hold. A worker of one's own answering the run's workflow task
// has no such key; a run whose recorded rules are not the worker's gets no
// permit.

// PermitActivity is the local activity that signs a permit: it takes a
// PermitRequest and returns the signed permit.
const PermitActivity = "toolgate.permit"

// PermitRequest is what a run asks its worker to sign: the permit's claims
// as the run fills them (no id, key id or time), and what the worker checks
// them against its own policy with — the call's arguments, the run's
// requester, and the signed decisions that let the call through.
type PermitRequest struct {
	Claims      permit.Claims   `json:"claims"`
	Args        json.RawMessage `json:"args"`
	RequestedBy string          `json:"requested_by,omitempty"`
	Proof       []string        `json:"proof,omitempty"`
}

// RefusedUnverified is the ApplicationError type of a permit refused because
// the decision the run names is not one the worker's own policy can verify.
const RefusedUnverified = "DecisionUnverified"

// RefusedRules is the ApplicationError type of a permit refused because the
// run was held to rules that differ from the worker's own.
const RefusedRules = "RulesDiffer"

// RulesDigest is the digest of the rules a run holds toolName to under cfg:
// the policy, the always_approve switch and the tool's spec, as JSON. The
// worker signs a permit only when the run's digest equals its own.
func RulesDigest(cfg WorkerConfig, toolName string) string {
	return rulesDigest(policyDigest(cfg.Policy), cfg.AllowAutoApprove, specOf(cfg, toolName))
}

func specOf(cfg WorkerConfig, name string) *tool.Spec {
	for i := range cfg.Tools {
		if cfg.Tools[i].Name == name {
			return &cfg.Tools[i]
		}
	}
	return nil
}

func policyDigest(p *policy.Policy) string {
	raw, _ := json.Marshal(p) // a policy always encodes: the worker recorded it so
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

func rulesDigest(policy string, allowAuto bool, spec *tool.Spec) string {
	raw, _ := json.Marshal(struct {
		Policy           string     `json:"policy"`
		AllowAutoApprove bool       `json:"allow_auto_approve"`
		Spec             *tool.Spec `json:"spec"`
	}{policy, allowAuto, spec})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// rules is the run's rules digest for spec (the recorded config's).
func (r *run) rules(spec tool.Spec) string {
	if r.policyDigest == "" {
		r.policyDigest = policyDigest(r.Config.Policy)
	}
	return rulesDigest(r.policyDigest, r.Config.AllowAutoApprove, &spec)
}

// permit asks the worker to sign the permit of one activity of call c.
func (r *run) permit(ctx workflow.Context, c tool.Call, spec tool.Spec, req tool.Request, activityID string) (string, error) {
	info := workflow.GetInfo(ctx)
	tq := info.TaskQueueName
	if spec.Remote() {
		tq = spec.TaskQueue
	}
	digest, _ := tool.Digest(c.Tool, c.Args) // c.Args is canonical: check passed
	claims := permit.Claims{
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		ActivityID: activityID, Activity: spec.ActivityType(), TaskQueue: tq,
		CallID: c.ID, Tool: c.Tool, ArgsDigest: digest, Key: req.IdempotencyKey,
		Destructive: spec.Destructive, Rules: r.rules(spec),
	}
	preq := PermitRequest{Claims: claims, Args: c.Args, RequestedBy: r.RequestedBy}
	if a := req.Approval; a != nil {
		preq.Claims.Approver, preq.Claims.Kind, preq.Proof = a.Approver, string(a.Kind), a.Proof
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{RefusedRules, RefusedUnverified}},
	})
	var token string
	err := workflow.ExecuteLocalActivity(lctx, PermitActivity, preq).Get(lctx, &token)
	r.localSince++
	return token, err
}
