package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/timeline"
	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// Operator is who rewinds or forks a run. Under a worker's policy the act is
// signed with Key, and Name must hold one of the policy's operators roles;
// without a policy Name is recorded as given.
type Operator struct {
	Name string
	Key  ed25519.PrivateKey
	// ValidFor is how long the signed act stays valid (default 10 minutes).
	ValidFor time.Duration
	// Token is the act already signed elsewhere, by Name (a browser that
	// holds the key: the inbox), sent as it is; Key must then be nil. For
	// Rewind it is a signed.ActionRewind token over the run, the call, the
	// preview's BaseRunID (source) and Digest (preview); for Fork, a start
	// token of action signed.ActionFork whose input_digest is
	// workflows.InputDigest of ForkInput's JSON. The run verifies it as it
	// verifies one the client signs.
	Token string
}

// token is by's signed act: the one given (Token), or none for a Key to sign.
func (by Operator) token() (string, error) {
	if by.Token != "" && by.Key != nil {
		return "", refused(ErrRefusedInput, "an operator signs with a key or brings a token signed elsewhere, not both")
	}
	return by.Token, nil
}

// Steps reads run id's chain from the server and tells its steps: every
// call with its status, approver and the point a rewind to it resets to.
func (c *Client) Steps(ctx context.Context, id string) (*timeline.Timeline, error) {
	t, err := timeline.Read(ctx, c.tc, id, timeline.Options{DataConverter: c.dc, FailureConverter: c.fc})
	if err != nil {
		return nil, c.classify(ctx, id, err)
	}
	return t, nil
}

// RewindPreview says what a rewind of run id to just before call's step
// would do, and names it with a digest: Rewind takes that digest and is
// refused once the run has moved on.
func (c *Client) RewindPreview(ctx context.Context, id, call string) (timeline.Preview, error) {
	t, err := c.Steps(ctx, id)
	if err != nil {
		return timeline.Preview{}, err
	}
	p, err := t.Preview(call)
	if err != nil {
		return p, refused(ErrRefusedInput, err.Error())
	}
	return p, nil
}

// Rewound is a rewind done: its preview and the run it made.
type Rewound struct {
	Preview timeline.Preview `json:"preview"`
	RunID   string           `json:"run_id"`
}

// Rewind resets run id to just before call's step — a Temporal reset to the
// end of the workflow task the step began in, re-applying no signal and no
// update, so every approval after the point is gone — and tells the new run
// who rewound it (workflows.SignalRewound). expect is the digest of the
// preview the operator saw (RewindPreview): the rewind is refused, and
// nothing changes, if the run has moved on since (ErrStale), or if the run
// would not take the operator's act (checked first, by the run itself).
func (c *Client) Rewind(ctx context.Context, id, call, expect string, by Operator) (Rewound, error) {
	given, err := by.token()
	if err != nil {
		return Rewound{}, err
	}
	if expect == "" {
		return Rewound{}, refused(ErrRefusedInput, "a rewind takes the digest of its preview (toolgate rewind "+id+" --to "+call+" --dry-run): say what you expect to happen")
	}
	p, err := c.RewindPreview(ctx, id, call)
	if err != nil {
		return Rewound{}, err
	}
	if p.Digest != expect {
		return Rewound{Preview: p}, refused(ErrStale, fmt.Sprintf("run %s moved on since the preview you expect (digest %s): its preview is now digest %s (its current run %s has %d events); "+
			"nothing changed — look at the new preview and rewind with its digest", id, clipTo(expect, 64), p.Digest, p.CurrentRunID, p.LastEvent))
	}
	// The reset's id: the reset's request id, named by its reason and signed
	// in the operator's token, so the run takes the note only in the run
	// this reset makes (a token signed elsewhere brings its own).
	reset, err := resetID(given)
	if err != nil {
		return Rewound{}, err
	}
	note := workflows.RewindNote{CallID: call, Tool: p.Tool, Step: p.Step, BaseRunID: p.BaseRunID, Event: p.ResetEvent, Preview: p.Digest, By: by.Name, Token: given, Reset: reset}
	if by.Key != nil {
		cl := claims(by.Name, id, signed.ActionRewind, by.ValidFor)
		cl.CallID, cl.Source, cl.Preview, cl.Reset = call, p.BaseRunID, p.Digest, reset
		if note.Token, err = signed.Sign(by.Key, cl); err != nil {
			return Rewound{}, fmt.Errorf("signing %s's rewind: %w", by.Name, err)
		}
	}
	// The run checks the act before anything changes.
	_, err = c.tc.QueryWorkflow(ctx, id, p.CurrentRunID, workflows.QueryCheckRewind, note)
	if err != nil {
		var qf *serviceerror.QueryFailed
		if errors.As(err, &qf) {
			return Rewound{Preview: p}, refused(ErrUnauthorized, "rewind refused by run "+id+": "+qf.Message+"; nothing changed")
		}
		return Rewound{Preview: p}, c.classify(ctx, id, err)
	}
	done, err := c.carry(ctx, id, note)
	if err != nil {
		return Rewound{Preview: p}, err
	}
	return Rewound{Preview: p, RunID: done.RunID}, nil
}

// carry sends a rewind to a worker of the run's task queue
// (workflows.RewindWorkflow, in the runs' namespace), which carries it out:
// the run checks the act, the worker resets the run, records the rewind in
// the authority namespace and tells the new run. The request's workflow
// answers whoever answered its task — on a server where anyone may poll the
// queue, not necessarily a worker — so what counts is the record, read
// where only workers write.
func (c *Client) carry(ctx context.Context, id string, note workflows.RewindNote) (workflows.RewindDone, error) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return workflows.RewindDone{}, c.classify(ctx, id, err)
	}
	tq := d.GetWorkflowExecutionInfo().GetTaskQueue()
	run, err := c.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                       workflows.RewindWorkflowID(note.Reset),
		TaskQueue:                tq,
		WorkflowExecutionTimeout: workflows.RewindTimeout,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflows.RewindWorkflow, workflows.RewindRequest{WorkflowID: id, Note: note})
	if err != nil {
		return workflows.RewindDone{}, fmt.Errorf("sending the rewind of run %s to a worker of task queue %s: %w", id, tq, err)
	}
	var done workflows.RewindDone
	err = run.Get(ctx, &done)
	var (
		ae      *temporal.ApplicationError
		timeout *temporal.TimeoutError
	)
	switch {
	case errors.As(err, &ae):
		return done, refused(ErrUnauthorized, ae.Message())
	case errors.As(err, &timeout):
		return done, fmt.Errorf("no worker of task queue %s carried out the rewind of run %s within %s: a rewind is carried out by a worker of the run's queue; "+
			"once one polls it, preview the rewind again", tq, id, workflows.RewindTimeout)
	case err != nil:
		return done, fmt.Errorf("the rewind of run %s (workflow %s): %w", id, run.GetID(), err)
	}
	var rec workflows.RewindRecord
	wid := workflows.RewindRecordPrefix + note.Reset
	err = c.lookup(ctx, wid, &rec)
	if errors.Is(err, authority.ErrNoRecord) {
		// A worker that keeps no authority namespace (worker.Options.Authority
		// unset) records in the runs' namespace. Its record confirms no more
		// than its answer did, and such a worker's runs check their rewinds
		// against the same namespace.
		if authority.Lookup(ctx, c.tc, "", wid, &rec) == nil {
			err = nil
		}
	}
	switch {
	case errors.Is(err, authority.ErrNoRecord):
		return done, fmt.Errorf("the rewind of run %s was answered as carried out (new run %s), but the authority namespace holds no record of it (%s): "+
			"whoever answered the request was not a worker of the run; check the workers polling %s", id, done.RunID, wid, tq)
	case err != nil:
		return done, fmt.Errorf("the rewind of run %s was answered as carried out (new run %s), but reading its record %s to confirm it failed: %w", id, done.RunID, wid, err)
	case rec.NewRunID != done.RunID || rec.WorkflowID != id || rec.BaseRunID != note.BaseRunID || rec.Event != note.Event:
		return done, fmt.Errorf("the rewind of run %s was answered as carried out into run %s, but its record %s names run %s of %s (reset %s at event %d): "+
			"whoever answered the request was not a worker of the run; check the workers polling %s", id, done.RunID, wid, rec.NewRunID, rec.WorkflowID, rec.BaseRunID, rec.Event, tq)
	}
	return done, nil
}

// resetID is a rewind's reset id: the one a token signed elsewhere signs
// (signed.Claims.Reset), or a new random one.
func resetID(given string) (string, error) {
	if given != "" {
		c, err := signed.Peek(given)
		if err != nil {
			return "", refused(ErrRefusedInput, fmt.Sprintf("the rewind's token does not decode: %v", err))
		}
		if c.Reset != "" {
			return c.Reset, nil
		}
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("drawing the reset's id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Fork starts run newID as a fork of run src at call at: a new run that
// starts as src stood just before at's step — transcript, memo of reads,
// call counter — and proposes that step again, with at's arguments replaced
// by args if set. The worker reads src's state from the server; no approval
// is carried, and the fork's idempotency keys are its own. Under a policy
// the fork is signed by by, who must hold an operators role.
func (c *Client) Fork(ctx context.Context, src, at, newID string, args json.RawMessage, by Operator) (sdkclient.WorkflowRun, error) {
	given, err := by.token()
	if err != nil {
		return nil, err
	}
	in, err := ForkInput(src, at, args)
	if err != nil {
		return nil, err
	}
	in.RequestToken = given
	if by.Key != nil {
		if err := signStart(&in, newID, by.Name, signed.ActionFork, by.Key, by.ValidFor); err != nil {
			return nil, err
		}
	}
	return c.Start(ctx, newID, in)
}

// ForkInput is the input Fork starts a fork of run src at call at with:
// only Fork set, args (if any) canonical. A fork's token signed elsewhere
// (Operator.Token) signs workflows.InputDigest of its JSON, which is
// {"fork":{"args":ARGS,"at":AT,"source":SRC},"goal":"","planner":{"kind":""}}
// canonicalized, "args" left out when there are none.
func ForkInput(src, at string, args json.RawMessage) (workflows.RunInput, error) {
	in := workflows.RunInput{Fork: &workflows.Fork{Source: src, At: at}}
	if len(args) > 0 {
		canon, err := tool.Canonical(args)
		if err != nil {
			return in, refused(ErrRefusedInput, fmt.Sprintf("fork arguments: %v", err))
		}
		in.Fork.Args = canon
	}
	return in, nil
}
