package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/signed"
)

// Pause signs and sends operator's pause of tool (ledger.AllTools: every
// destructive tool) on the fleet ledger of taskQueue: from when it returns,
// no run of that queue starts a call of the tool, and a call that waits is
// refused when decided, until Unpause. operator must hold one of the
// operators' roles of the worker's policy; reason is told to every run it
// stops.
func (c *Client) Pause(ctx context.Context, taskQueue, tool, reason, operator string, key ed25519.PrivateKey) (ledger.View, error) {
	if strings.TrimSpace(reason) == "" {
		return ledger.View{}, refused(ErrRefusedInput, "a pause needs a reason: every run it stops is told it")
	}
	return c.toggle(ctx, taskQueue, tool, reason, operator, key, true)
}

// Unpause signs and sends operator's unpause of tool on the fleet ledger of
// taskQueue: runs may call it again.
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
	v, err := ledger.Toggle(ctx, c.tc, taskQueue, pause, tok)
	if err != nil {
		return ledger.View{}, err // the ledger's refusal says why ("pause refused: …")
	}
	return v, nil
}

// Guards answers the fleet ledger of taskQueue: each guard's use within its
// window, and the tools paused. A ledger never started has nothing to show:
// the View is empty and ok false.
func (c *Client) Guards(ctx context.Context, taskQueue string) (v ledger.View, ok bool, err error) {
	v, err = ledger.Guards(ctx, c.tc, taskQueue)
	if errors.Is(err, ledger.ErrNotStarted) {
		return ledger.View{}, false, nil
	}
	if err != nil {
		return ledger.View{}, false, fmt.Errorf("reading the fleet ledger of task queue %s: %w", taskQueue, err)
	}
	return v, true, nil
}
