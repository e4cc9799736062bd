package worker

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// permits signs the permits of this worker's runs and checks them where its
// tools run (package permit).
type permits struct {
	key      ed25519.PrivateKey
	rules    map[string]string    // this worker's rules digest per tool
	specs    map[string]tool.Spec // this worker's declarations
	verifier *permit.Verifier
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
	p := &permits{key: key, rules: map[string]string{}, specs: map[string]tool.Spec{}}
	for _, s := range cfg.Tools {
		p.rules[s.Name] = workflows.RulesDigest(cfg, s.Name)
		p.specs[s.Name] = s
	}
	p.verifier = &permit.Verifier{
		Keys:   permit.NewKeys(append([]ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, o.TrustedWorkerKeys...)...),
		Claims: o.PermitClaimer,
		Rules: func(name string) (string, bool) {
			d, ok := p.rules[name]
			return d, ok
		},
		Destructive: func(name string) bool { return p.specs[name].Destructive },
	}
	return p, nil
}

// sign is the PermitActivity: it signs c for a run whose rules for the tool
// are this worker's own, and refuses any other.
func (p *permits) sign(ctx context.Context, c permit.Claims) (string, error) {
	own, ok := p.rules[c.Tool]
	switch {
	case !ok:
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("no permit: tool %q is not one this worker declares", c.Tool), workflows.RefusedRules, nil)
	case c.Rules != own:
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"no permit for %s: this run is held to rules (the policy, the always_approve switch and the tool's spec; digest %s) "+
				"that differ from this worker's own (%s); a run's rules are the worker's, never what a run recorded: "+
				"a worker changed its policy or tools while the run was open, or something other than this worker answered the run's first workflow task",
			c.Tool, c.Rules[:min(16, len(c.Rules))], own[:16]), workflows.RefusedRules, nil)
	}
	c.Destructive = p.specs[c.Tool].Destructive
	c.ID = permit.IDFor(c.WorkflowID, c.RunID, c.ActivityID)
	c.IssuedAt = time.Now().Unix()
	if activity.IsActivity(ctx) {
		c.IssuedAt = activity.GetInfo(ctx).StartedTime.Unix()
	}
	return permit.Sign(p.key, c)
}

// guard makes run check its request's permit before it runs: a request
// without a valid one is refused, not retried, and the tool never sees it
// (permit.Failure).
func (p *permits) guard(run tool.ActivityFunc) tool.ActivityFunc {
	return func(ctx context.Context, req tool.Request) (tool.Response, error) {
		if _, err := p.verifier.Check(ctx, req); err != nil {
			return tool.Response{}, permit.Failure(err)
		}
		return run(ctx, req)
	}
}
