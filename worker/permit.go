package worker

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// permits signs the permits of this worker's runs and checks them where its
// tools run (package permit).
type permits struct {
	key      ed25519.PrivateKey
	engine   *policy.Engine       // this worker's own policy, compiled (nil: none)
	rules    map[string]string    // this worker's rules digest per tool
	specs    map[string]tool.Spec // this worker's declarations
	verifier *permit.Verifier
	pauses   *pauseWatch // the fleet's pauses, checked where a call is about to run
}

func newPermits(o Options, cfg workflows.WorkerConfig) (*permits, error) {
	key := o.WorkerKey
	if key == nil {
		// No key given: one for this process. Its permits are good here
		// only; a fleet shares one (toolgate keys worker FILE).
		var err error
		if _, key, err = signed.GenerateKey(); err != nil {
			return nil, err
		}
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("worker key of %d bytes, want an Ed25519 private key (%d)", len(key), ed25519.PrivateKeySize)
	}
	p := &permits{key: key, rules: map[string]string{}, specs: map[string]tool.Spec{}, pauses: newPauseWatch(o.Authority, o.DataConverter)}
	if src, ok := o.Ledger.(ledger.PauseSource); ok { // an in-process ledger: its pauses
		p.pauses.read = src.Pauses
	}
	if o.Policy != nil {
		e, err := policy.Compile(o.Policy)
		if err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		p.engine = e
	}
	for _, s := range cfg.Tools {
		p.rules[s.Name] = workflows.RulesDigest(cfg, s.Name)
		p.specs[s.Name] = s
	}
	claims := o.PermitClaimer
	if claims == nil && o.Authority != nil {
		claims = permit.TemporalClaimer{Client: o.Authority.Client, Namespace: o.Authority.Namespace}
	}
	p.verifier = &permit.Verifier{
		Keys:   permit.NewKeys(append([]ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, o.TrustedWorkerKeys...)...),
		Claims: claims,
		Rules: func(name string) (string, bool) {
			d, ok := p.rules[name]
			return d, ok
		},
		Destructive: func(name string) bool { return p.specs[name].Destructive },
	}
	return p, nil
}

// sign is the PermitActivity: it signs a permit for a run whose rules for
// the tool are this worker's own, and — under a policy — whose decision it
// verifies against its own policy; it refuses any other.
func (p *permits) sign(ctx context.Context, req workflows.PermitRequest) (string, error) {
	c := req.Claims
	own, ok := p.rules[c.Tool]
	switch {
	case !ok:
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("no permit: tool %q is not one this worker declares", c.Tool), workflows.RefusedRules, nil)
	case c.Rules != own:
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"no permit for %s: this run is held to rules (the policy, the always_approve switch and the tool's spec; digest %s) "+
				"that differ from this worker's own (%s); a run's rules are the worker's, never what a run recorded: "+
				"a worker changed its policy or tools while the run was open, or something other than this worker answered the run's first workflow task",
			c.Tool, text.Cut(c.Rules, 16), own[:16]), workflows.RefusedRules, nil)
	}
	c.Destructive = p.specs[c.Tool].Destructive
	if p.engine != nil {
		if err := p.verifyDecision(req, c.Destructive); err != nil {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("no permit for %s: %v", c.Tool, err), workflows.RefusedUnverified, nil)
		}
	}
	// The run's own task queue is this local activity's (the worker's).
	if activity.IsActivity(ctx) {
		if err := p.pauses.check(ctx, activity.GetInfo(ctx).TaskQueue, c.Tool, c.Destructive); err != nil {
			return "", err
		}
	}
	c.ID = permit.NewID()
	c.IssuedAt = time.Now().Unix()
	return permit.Sign(p.key, c)
}

// guard makes run check its request's permit before it runs: a request
// without a valid one is refused, not retried, and the tool never sees it
// (permit.Failure).
func (p *permits) guard(run tool.ActivityFunc) tool.ActivityFunc {
	return func(ctx context.Context, req tool.Request) (tool.Response, error) {
		c, err := p.verifier.Check(ctx, req)
		if err != nil {
			return tool.Response{}, permit.Failure(err)
		}
		// A pause stops every new execution, a retry's too. The tool runs
		// on its run's task queue (a tool this worker hosts for another
		// queue's runs is checked when that queue's worker signs its
		// permit): that queue's ledger holds the pause.
		info := activity.GetInfo(ctx)
		name := c.Tool
		if info.IsLocalActivity || name == "" {
			name = info.ActivityType.Name
		}
		if err := p.pauses.check(ctx, info.TaskQueue, name, p.specs[name].Destructive); err != nil {
			return tool.Response{}, err
		}
		return run(ctx, req)
	}
}

// verifyDecision checks, against this worker's own policy, the decision a
// run says let its call through: a rule of the policy that allows it, or
// the signed approvals of enough distinct approvers the policy declares, for
// this run, this call and these exact arguments. A grant is taken on the
// run's word: its token is spent when granted, not kept.
func (p *permits) verifyDecision(req workflows.PermitRequest, destructive bool) error {
	c := req.Claims
	switch tool.DecisionKind(c.Kind) {
	case "":
		if destructive {
			return errors.New("the call is destructive and the run names no decision")
		}
		return nil
	case tool.ApprovedByGrant:
		return nil
	case tool.ApprovedByRule:
		v := p.engine.Evaluate(c.Tool, destructive, req.Args, req.RequestedBy)
		if v.Decide != policy.Allow || "rule:"+v.Rule != c.Approver {
			return fmt.Errorf("the run says %s let it through, but this worker's policy decides %s by rule %q", text.Clip(c.Approver, 80), v.Decide, v.Rule)
		}
		return nil
	case tool.ApprovedAtGate, tool.ApprovedInterrupt:
		return p.verifyApprovals(req, destructive)
	}
	return fmt.Errorf("a decision of kind %q, which this worker's policy does not make", text.Clip(c.Kind, 32))
}

// verifyApprovals checks the signed approvals of a call decided by humans.
func (p *permits) verifyApprovals(req workflows.PermitRequest, destructive bool) error {
	c, pol := req.Claims, p.engine.Policy()
	need := pol.ToolApprovers(c.Tool)
	if c.Kind == string(tool.ApprovedAtGate) {
		if v := p.engine.Evaluate(c.Tool, destructive, req.Args, req.RequestedBy); v.Decide == policy.Ask {
			need = v.Need
		} else {
			need = policy.Approvers{} // a guard asked: any approver of the policy
		}
	}
	need.Count = max(need.Count, 1)
	approvers := map[string]bool{}
	var why []string
	for _, tok := range req.Proof {
		name, err := p.verifyApproval(tok, c, need)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		approvers[name] = true
	}
	if len(approvers) >= need.Count {
		return nil
	}
	msg := fmt.Sprintf("the run says %s approved it, but it carries %d signed approval(s) of this call by approvers of this worker's own policy, and the policy needs %d",
		text.Clip(c.Approver, 200), len(approvers), need.Count)
	if len(why) > 0 {
		msg += " (" + text.Clip(strings.Join(why, "; "), 600) + ")"
	}
	return errors.New(msg)
}

// verifyApproval verifies one signed approval of c against the worker's own
// policy and returns its approver.
func (p *permits) verifyApproval(tok string, c permit.Claims, need policy.Approvers) (string, error) {
	pol := p.engine.Policy()
	claims, err := signed.Peek(tok)
	if err != nil {
		return "", err
	}
	key, ok := pol.Key(claims.Approver)
	if claims.Via != "" {
		if err := pol.DecidesVia(claims.Approver, claims.Via); err != nil {
			return "", err
		}
		key, ok = pol.ViaPublicKey()
	}
	if !ok {
		return "", fmt.Errorf("%q is not an approver of this worker's policy", text.Clip(claims.Approver, 80))
	}
	if _, err := signed.Verify(tok, key); err != nil {
		return "", fmt.Errorf("%s's token: %v", text.Clip(claims.Approver, 80), err)
	}
	kind := claims.Kind
	if kind == "" {
		kind = string(tool.ApprovedAtGate)
	}
	edited := claims.EditedDigest
	switch {
	case claims.Action != signed.ActionApprove:
		return "", fmt.Errorf("%s's token signs %q", claims.Approver, text.Clip(claims.Action, 32))
	case claims.WorkflowID != c.WorkflowID || claims.CallID != c.CallID:
		return "", fmt.Errorf("%s's token approves call %s of %s", claims.Approver, text.Clip(claims.CallID, 32), text.Clip(claims.WorkflowID, 80))
	case kind != c.Kind:
		return "", fmt.Errorf("%s's token approves a %s question", claims.Approver, text.Clip(kind, 32))
	case edited != c.ArgsDigest && (edited != "" || claims.ArgsDigest != c.ArgsDigest):
		return "", fmt.Errorf("%s's token approves other arguments", claims.Approver)
	}
	if err := pol.Eligible(claims.Approver, need); err != nil {
		return "", err
	}
	return claims.Approver, nil
}
