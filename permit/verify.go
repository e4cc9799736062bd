package permit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/tool"
)

// Refused is the ApplicationError type of a tool activity that refused its
// request for want of a valid permit (not retried).
const Refused = "PermitRefused"

// Decision kinds a destructive call's permit may name (tool.DecisionKind).
var approvedKinds = map[string]bool{
	string(tool.ApprovedAtGate): true, string(tool.ApprovedInterrupt): true, string(tool.ApprovedByPolicy): true,
	string(tool.ApprovedByRule): true, string(tool.ApprovedByGrant): true,
}

// Verifier checks a tool activity's permit where the effect happens.
type Verifier struct {
	// Keys are the worker keys trusted.
	Keys Keys
	// Claims records each destructive permit's use once; nil: the
	// activity's own Temporal client (TemporalClaimer).
	Claims Claimer
	// Rules, when set, gives this worker's own rules digest of a tool: a
	// permit naming another digest is refused (a run held to rules other
	// than this worker's). Workers hosting a tool of another worker's
	// declaration leave it nil: the signing worker compared them.
	Rules func(tool string) (string, bool)
	// Destructive, when set, is this worker's own declaration of a tool;
	// nil: the permit's (signed by the gate's worker).
	Destructive func(tool string) bool
}

// Check verifies req's permit for the activity ctx runs: its signature,
// that it names this run, activity, call, arguments and decision, the rules
// (Rules), and for a destructive tool that a decision let it through and
// that it is claimed by no other activity. A local activity needs none: it
// runs only in the worker whose workflow task scheduled it.
func (v *Verifier) Check(ctx context.Context, req tool.Request) (Claims, error) {
	if !activity.IsActivity(ctx) {
		return Claims{}, fmt.Errorf("%w: called outside an activity, where nothing says which run and activity it serves", ErrMissing)
	}
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity {
		return Claims{}, nil
	}
	c, err := Verify(req.Permit, v.Keys)
	if err != nil {
		if errors.Is(err, ErrMissing) {
			return c, fmt.Errorf("%w: this activity runs only for a call a toolgate gate let through, and this request carries no permit "+
				"(scheduled by something other than a toolgate run of rules version 11 or later)", err)
		}
		return c, err
	}
	digest, err := tool.Digest(c.Tool, req.Args)
	if err != nil {
		return c, fmt.Errorf("%w: the arguments do not parse: %v", ErrMismatch, err)
	}
	var approver, kind string
	if req.Approval != nil {
		approver, kind = req.Approval.Approver, string(req.Approval.Kind)
	}
	if err := Check(c, Binding{
		WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID, ActivityID: info.ActivityID,
		Activity: info.ActivityType.Name, TaskQueue: info.TaskQueue,
		CallID: req.CallID, ArgsDigest: digest, Key: req.IdempotencyKey, Approver: approver, Kind: kind,
	}); err != nil {
		return c, err
	}
	if v.Rules != nil {
		own, ok := v.Rules(c.Tool)
		if !ok {
			return c, fmt.Errorf("%w: tool %q is not one this worker declares", ErrMismatch, cut(c.Tool, 120))
		}
		if c.Rules != own {
			return c, fmt.Errorf("%w: the run was held to rules for %s (digest %s) that differ from this worker's own (%s): a run's rules are the worker's",
				ErrMismatch, c.Tool, cut(c.Rules, 16), cut(own, 16))
		}
	}
	destructive := c.Destructive
	if v.Destructive != nil {
		destructive = v.Destructive(c.Tool)
	}
	if !destructive {
		return c, nil
	}
	if !approvedKinds[c.Kind] || c.Approver == "" {
		return c, fmt.Errorf("%w: %s is destructive and its permit names no decision that let it through", ErrMismatch, c.Tool)
	}
	claims := v.Claims
	if claims == nil {
		claims = TemporalClaimer{}
	}
	if err := claims.Claim(ctx, c, ClaimantOf(info)); err != nil {
		return c, err
	}
	return c, nil
}

// ClaimantOf names one scheduled activity, the same on each of its
// attempts: its workflow, run, activity id and the time it was scheduled.
func ClaimantOf(info activity.Info) string {
	return info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID + "@" +
		strconv.FormatInt(info.ScheduledTime.UnixNano(), 10)
}

// Claimer records a permit's use once: the first claimant takes it, the
// same claimant may claim it again (an attempt after a retry or a crash),
// any other is refused with ErrUsed.
type Claimer interface {
	Claim(ctx context.Context, c Claims, claimant string) error
}

// ClaimPrefix starts the workflow id of a permit's claim.
const ClaimPrefix = "toolgate-spent-permit-"

// ClaimQueue, ClaimTimeout and MarkerWorkflow are those of every claim
// (package authority): the task queue no worker polls, how long the marker
// stays open, and its workflow type.
const (
	ClaimQueue     = authority.ClaimQueue
	ClaimTimeout   = authority.ClaimTimeout
	MarkerWorkflow = authority.MarkerWorkflow
)

// TemporalClaimer claims a permit on the Temporal server: it starts the
// marker workflow ClaimPrefix+ID for the claimant (authority.Claim). The
// server answers the same claimant again with the run it started and
// refuses any other for as long as it keeps the closed marker (the
// namespace's retention). The marker is started on authority.ClaimQueue,
// which no worker polls, and times out (closes) after
// authority.ClaimTimeout. A worker claims in its authority namespace, where
// no client of the runs may delete or start a marker.
type TemporalClaimer struct {
	// Client, nil: the activity's (activity.GetClient).
	Client client.Client
	// Namespace of the marker; "": the activity's.
	Namespace string
}

// Claim implements Claimer.
func (t TemporalClaimer) Claim(ctx context.Context, c Claims, claimant string) error {
	cl := t.Client
	if cl == nil {
		cl = activity.GetClient(ctx)
	}
	if cl == nil {
		return errors.New("permit: no Temporal client to claim the permit with")
	}
	ns := t.Namespace
	if ns == "" {
		ns = activity.GetInfo(ctx).Namespace
	}
	wid := ClaimPrefix + c.ID
	err := authority.Claim(ctx, cl, ns, wid, claimant)
	switch {
	case errors.Is(err, authority.ErrUsed):
		return fmt.Errorf("%w: permit %s of %s's call %s was claimed by another activity (workflow %s holds its use): a permit runs one activity",
			ErrUsed, c.ID, c.WorkflowID, c.CallID, wid)
	case err != nil:
		return fmt.Errorf("permit: claiming its use: %w", err)
	}
	return nil
}

// MemoryClaimer claims permits in this process's memory: for tests, and for
// a single worker that runs every tool of its runs (its claims end with it).
type MemoryClaimer struct {
	mu     sync.Mutex
	claims map[string]string
}

// NewMemoryClaimer is an empty MemoryClaimer.
func NewMemoryClaimer() *MemoryClaimer { return &MemoryClaimer{claims: map[string]string{}} }

// Claim implements Claimer.
func (m *MemoryClaimer) Claim(_ context.Context, c Claims, claimant string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if by, ok := m.claims[c.ID]; ok && by != claimant {
		return fmt.Errorf("%w: permit %s of %s's call %s was claimed by another activity", ErrUsed, c.ID, c.WorkflowID, c.CallID)
	}
	m.claims[c.ID] = claimant
	return nil
}
