package ledger

import (
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/signed"
)

// This file takes signed pauses and unpauses: an operator's token, bound
// to this ledger, used once.

// MarkerWorkflow and SpentPrefix are the marker a token's use is claimed
// with on the server: the workflow type started and the start of its id.
// They equal workflows.StartMarkerWorkflow and workflows.SpentMarkerPrefix
// (package workflows tests it; this package cannot import workflows, which
// imports it): the worker registers the marker workflow, and a token's use
// is one id whichever workflow claims it.
const (
	MarkerWorkflow = "toolgate.start-token"
	SpentPrefix    = "toolgate-spent-"
)

// tokenSkew is how far in the future a pause's issued-at may be (the
// operator's clock against the ledger's): workflows.TokenSkew, as a run
// allows its decisions.
const tokenSkew = 5 * time.Minute

func verb(pause bool) string {
	if pause {
		return signed.ActionPause
	}
	return signed.ActionUnpause
}

// checkSize refuses a switch with no token, or one too long to read.
func checkSize(pause bool, token string) error {
	switch {
	case token == "":
		return fmt.Errorf("%s refused: no token (an operator's signed %s)", verb(pause), verb(pause))
	case len(token) > signed.MaxTokenBytes:
		return fmt.Errorf("%s refused: the token is %d bytes, at most %d", verb(pause), len(token), signed.MaxTokenBytes)
	}
	return nil
}

// what names a switch's tool in messages.
func what(tool string) string {
	if tool == AllTools {
		return "every destructive tool (*)"
	}
	return tool
}

// check says why the ledger does not take token as a pause (pause true) or
// an unpause, or returns its claims. It changes nothing: validators call it.
func (l *ledger) check(ctx workflow.Context, pause bool, token string) (signed.Claims, error) {
	v := verb(pause)
	fail := func(format string, a ...any) (signed.Claims, error) {
		return signed.Claims{}, fmt.Errorf(v+" refused: "+format, a...)
	}
	if err := checkSize(pause, token); err != nil {
		return signed.Claims{}, err
	}
	if l.engine == nil {
		return fail("this worker has no policy, so nobody may %s a tool", v)
	}
	c, err := signed.Peek(token)
	if err != nil {
		return fail("%v", err)
	}
	p := l.engine.Policy()
	pub, ok := p.Key(c.Approver)
	if !ok {
		return fail("%q is not an approver of this worker's policy", cut(c.Approver, 80))
	}
	if _, err := signed.Verify(token, pub); err != nil {
		return fail("%v", err)
	}
	wid := workflow.GetInfo(ctx).WorkflowExecution.ID
	switch {
	case c.Action != v:
		return fail("%s's token is signed for the act %q, not %s", c.Approver, cut(c.Action, 40), v)
	case c.WorkflowID != wid:
		return fail("%s's token is signed for the workflow %q, not this ledger (%s): sign it for %s", c.Approver, cut(c.WorkflowID, 200), wid, wid)
	}
	if err := p.Operator(c.Approver); err != nil {
		if len(p.Operators) == 0 {
			return fail("this worker's policy names no operators (operators: [ROLE, …]), so nobody may %s a tool", v)
		}
		return fail("%s is not an operator: to %s a tool needs one of the operators' roles %v, and %s holds %v", c.Approver, v, p.Operators, c.Approver, p.Roles(c.Approver))
	}
	if err := c.CheckTime(workflow.Now(ctx), tokenSkew); err != nil {
		return fail("%v", err)
	}
	if life, limit := time.Duration(c.Expiry-c.IssuedAt)*time.Second, p.TokenLifetime(); life > limit {
		return fail("%s's token is valid for %s (iat to exp), longer than the %s this worker's policy allows (max_token_lifetime)", c.Approver, life, limit)
	}
	switch {
	case c.Tool == "":
		return fail("%s's token names no tool (claim tool: the tool, or %q for every destructive tool)", c.Approver, AllTools)
	case len(c.Tool) > MaxToolBytes:
		return fail("%s's token names a tool of %d bytes, at most %d", c.Approver, len(c.Tool), MaxToolBytes)
	case c.Reason == "" && pause:
		return fail("%s's token gives no reason (claim reason: why, told to every run the pause stops)", c.Approver)
	case len(c.Reason) > MaxReasonSize:
		return fail("%s's token gives a reason of %d bytes, at most %d", c.Approver, len(c.Reason), MaxReasonSize)
	}
	id := tokenID(token)
	switch {
	case slices.ContainsFunc(l.st.Spent, func(s Spent) bool { return s.ID == id }):
		return fail("this token was used already: the ledger takes a token once (sign a new one)")
	case l.claiming[id]:
		return fail("this token is being taken by another request right now: the ledger takes a token once")
	}
	if pause {
		if err := l.book.canPause(Pause{Tool: c.Tool, By: c.Approver, Reason: c.Reason}); err != nil {
			return fail("%v", err)
		}
	} else if !l.book.paused(c.Tool) {
		return fail("%s is not paused", what(c.Tool))
	}
	return c, nil
}

// toggle takes a signed pause or unpause: it checks it, claims its use on
// the server and applies it.
func (l *ledger) toggle(ctx workflow.Context, pause bool, token string) error {
	c, err := l.check(ctx, pause, token)
	if err != nil {
		return err
	}
	id := tokenID(token)
	l.claiming[id] = true
	defer delete(l.claiming, id)
	if err := l.claim(ctx, id); err != nil {
		return fmt.Errorf("%s refused: %w", verb(pause), err)
	}
	now := workflow.Now(ctx)
	l.spend(id, c.Expiry, now)
	log := workflow.GetLogger(ctx)
	if !pause {
		l.book.unpause(c.Tool) // unpaused meanwhile: it is not paused, as asked
		l.publishPauses(ctx)
		log.Info("toolgate ledger: unpaused", "tool", c.Tool, "by", c.Approver, "reason", c.Reason)
		return nil
	}
	if err := l.book.pause(Pause{Tool: c.Tool, By: c.Approver, Reason: c.Reason, At: now.UTC()}); err != nil {
		return fmt.Errorf("pause refused (its token is spent: sign a new one): %w", err)
	}
	l.publishPauses(ctx)
	log.Info("toolgate ledger: paused", "tool", c.Tool, "by", c.Approver, "reason", c.Reason)
	return nil
}

// claim records the use of the token of id on the server: it starts the
// marker child workflow SpentPrefix+id, which the server refuses to
// start twice (within the namespace's retention, longer than any token
// lives), so no reset of the ledger gives a token back.
func (l *ledger) claim(ctx workflow.Context, id string) error {
	wid := SpentPrefix + id
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            wid,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowRunTimeout:    time.Minute,
	})
	err := workflow.ExecuteChildWorkflow(cctx, MarkerWorkflow).GetChildWorkflowExecution().Get(ctx, nil)
	switch {
	case temporal.IsWorkflowExecutionAlreadyStartedError(err):
		return fmt.Errorf("this token was used already: its use is recorded on the server (workflow %s), outside the ledger, "+
			"so no reset gives it back; a token is taken once (sign a new one)", wid)
	case err != nil:
		return fmt.Errorf("recording the token's use (workflow %s) failed: %v; nothing changed, send it again", wid, err)
	}
	return nil
}

// spend remembers a token taken until it expires, forgetting the expired
// ones and, past MaxSpent, the oldest (the claim on the server guards it).
func (l *ledger) spend(id string, exp int64, now time.Time) {
	l.st.Spent = slices.DeleteFunc(l.st.Spent, func(s Spent) bool { return s.Exp <= now.Unix() })
	l.st.Spent = append(l.st.Spent, Spent{ID: id, Exp: exp})
	if over := len(l.st.Spent) - MaxSpent; over > 0 {
		l.st.Spent = slices.Delete(l.st.Spent, 0, over)
	}
}
