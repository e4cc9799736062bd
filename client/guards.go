package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/workflows"
)

// Pause signs and sends operator's pause of tool (ledger.AllTools: every
// destructive tool) on the fleet ledger of taskQueue: from when it returns,
// no run of that queue starts a call of the tool — a read too, whatever
// path the call took, since the worker checks the pauses where a call is
// about to run — and a call that waits is refused when decided, until
// Unpause. operator must hold one of the
// operators' roles of the worker's policy; reason is told to every run it
// stops.
func (c *Client) Pause(ctx context.Context, taskQueue, tool, reason, operator string, key ed25519.PrivateKey) (ledger.View, error) {
	if strings.TrimSpace(reason) == "" {
		return ledger.View{}, refused(ErrRefusedInput, "a pause needs a reason: every run it stops is told it")
	}
	return c.toggle(ctx, taskQueue, tool, reason, operator, key, true)
}

// Unpause signs and sends operator's unpause of tool on the fleet ledger of
// taskQueue: from when it returns, runs may call it again.
func (c *Client) Unpause(ctx context.Context, taskQueue, tool, reason, operator string, key ed25519.PrivateKey) (ledger.View, error) {
	return c.toggle(ctx, taskQueue, tool, reason, operator, key, false)
}

func (c *Client) toggle(ctx context.Context, taskQueue, tool, reason, operator string, key ed25519.PrivateKey, pause bool) (ledger.View, error) {
	if tool == "" {
		return ledger.View{}, refused(ErrRefusedInput, "name the tool, or ledger.AllTools for every destructive tool")
	}
	action := signed.ActionUnpause
	if pause {
		action = signed.ActionPause
	}
	cl := claims(operator, ledger.ID(taskQueue), action, 0)
	cl.Tool, cl.Reason = tool, reason
	tok, err := signed.Sign(key, cl)
	if err != nil {
		return ledger.View{}, fmt.Errorf("signing the %s: %w", action, err)
	}
	if _, err := c.relay(ctx, taskQueue, ledger.Act{Pause: pause, Token: tok}); err != nil {
		return ledger.View{}, err // the ledger's refusal says why ("pause refused: …")
	}
	// Every worker reads the pauses again at most ledger.PauseFreshness
	// after its last read: once this returns, every worker's next call
	// sees the act.
	select {
	case <-time.After(ledger.PauseFreshness):
	case <-ctx.Done():
		return ledger.View{}, fmt.Errorf("the %s of %s is taken, but a worker may not see it for up to %s: %w", action, tool, ledger.PauseFreshness, ctx.Err())
	}
	// The relay's answer is whoever answered its workflow task: on a server
	// where anyone may poll the queue, not necessarily a worker. What
	// counts is what the ledger holds, read where only workers write.
	v, ok, err := c.Guards(ctx, taskQueue)
	if err != nil {
		return ledger.View{}, fmt.Errorf("the %s was carried to the fleet ledger, but reading the ledger to confirm it failed: %w", action, err)
	}
	if held := ok && slices.ContainsFunc(v.Pauses, func(p ledger.Pause) bool { return p.Tool == tool }); held != pause {
		return ledger.View{}, fmt.Errorf("the %s of %s was answered as taken, but the fleet ledger of task queue %s does not show it: "+
			"whoever answered the act was not the ledger; check the workers polling %s", action, tool, taskQueue, taskQueue)
	}
	return v, nil
}

// ActTimeout bounds how long an operator's act waits for a worker of the
// task queue to carry it to the fleet ledger.
const ActTimeout = 2 * time.Minute

// relay sends a signed act to the fleet ledger of taskQueue through a
// worker of that queue (ledger.ActWorkflow, in the runs' namespace): the
// ledger lives in the authority namespace, which only workers write. The
// ledger checks the act's signature and takes its token once, so the
// relay's workflow, which anyone may start, carries nothing it could
// forge.
func (c *Client) relay(ctx context.Context, taskQueue string, a ledger.Act) (ledger.View, error) {
	run, err := c.tc.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
		ID:                       ledger.ActWorkflowID(a.Token),
		TaskQueue:                taskQueue,
		WorkflowExecutionTimeout: ActTimeout,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, ledger.ActWorkflow, a)
	if err != nil {
		return ledger.View{}, fmt.Errorf("sending the act to a worker of task queue %s: %w", taskQueue, err)
	}
	var v ledger.View
	err = run.Get(ctx, &v)
	var (
		ae      *temporal.ApplicationError
		timeout *temporal.TimeoutError
	)
	switch {
	case err == nil:
		return v, nil
	case errors.As(err, &ae):
		return ledger.View{}, errors.New(ae.Message())
	case errors.As(err, &timeout):
		return ledger.View{}, fmt.Errorf("no worker of task queue %s carried the act to the fleet ledger within %s: an operator's act goes through a worker of the queue", taskQueue, ActTimeout)
	}
	return ledger.View{}, fmt.Errorf("the act (workflow %s): %w", run.GetID(), err)
}

// Guards answers the fleet ledger of taskQueue: each guard's use within its
// window, and the tools paused. A ledger never started has nothing to show:
// the View is empty and ok false. It reads the ledger in the authority
// namespace (WithAuthority, else the namespace + authority.Suffix over the
// same connection); a worker with no authority namespace keeps its ledger
// in the runs' namespace, read there.
func (c *Client) Guards(ctx context.Context, taskQueue string) (v ledger.View, ok bool, err error) {
	ac, err := c.authorityClient(ctx)
	if err == nil {
		v, err = ledger.Guards(ctx, ac, taskQueue)
	}
	var nf *serviceerror.NamespaceNotFound
	if errors.As(err, &nf) || errors.Is(err, ledger.ErrNotStarted) {
		// A worker with no authority namespace keeps its ledger here.
		v, err = ledger.Guards(ctx, c.tc, taskQueue)
	}
	if errors.Is(err, ledger.ErrNotStarted) {
		return ledger.View{}, false, nil
	}
	if err != nil {
		return ledger.View{}, false, fmt.Errorf("reading the fleet ledger of task queue %s: %w", taskQueue, err)
	}
	return v, true, nil
}

// PauseOf is the pause that stops call it of run id from running once it
// is decided, if any: the fleet ledger of the run's task queue pauses its
// tool (or, the tool being destructive, every destructive tool). The
// worker refuses a paused tool's call where it is about to run, so an
// approval given during a pause lets nothing run. It also returns the
// run's task queue.
func (c *Client) PauseOf(ctx context.Context, id string, it workflows.Interrupt) (*ledger.Pause, string, error) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, "", c.classify(ctx, id, err)
	}
	tq := d.GetWorkflowExecutionInfo().GetTaskQueue()
	v, ok, err := c.Guards(ctx, tq)
	if err != nil || !ok {
		return nil, tq, err
	}
	if p, paused := ledger.PausedBy(v.Pauses, it.Tool, it.Destructive); paused {
		return &p, tq, nil
	}
	return nil, tq, nil
}

// authorityNamespace is the authority namespace's name: the one given
// (WithAuthority, WithConnection), else the namespace + authority.Suffix.
func (c *Client) authorityNamespace() string {
	if c.authorityNS != "" {
		return c.authorityNS
	}
	return authority.Namespace(c.Namespace())
}

// authorityClient is the client of the authority namespace: the one given
// (WithAuthority), else one made over tc's connection, once.
func (c *Client) authorityClient(ctx context.Context) (sdkclient.Client, error) {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.authority != nil {
		return c.authority, nil
	}
	ns := c.authorityNamespace()
	ac, err := sdkclient.NewClientFromExistingWithContext(ctx, c.tc, sdkclient.Options{Namespace: ns, DataConverter: c.dc, FailureConverter: c.fc})
	if err != nil {
		return nil, fmt.Errorf("a client of the authority namespace %s: %w", ns, err)
	}
	c.authority = ac
	return ac, nil
}
