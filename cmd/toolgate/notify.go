package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/notify"
)

// notifyUsage is how `toolgate notify` is used.
const notifyUsage = `usage: toolgate notify test FILE`

// notify is `toolgate notify test FILE`: it sends one test message to every
// target of the notify file FILE and says, per target, how it went.
func (c *cli) notify(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "test" {
		return errors.New(notifyUsage)
	}
	fs := c.flags("notify test")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(notifyUsage)
	}
	conf, err := notify.Load(pos[0])
	if err != nil {
		return err
	}
	res := notify.Test(ctx, conf)
	failed := 0
	for _, r := range res {
		if r.Err != nil {
			failed++
			fmt.Fprintf(c.stdout, "%s (%s): FAILED: %s\n", r.Target, r.Kind, oneLine(notify.Reason(r.Target, r.Kind, r.Err)))
			continue
		}
		fmt.Fprintf(c.stdout, "%s (%s): ok: %s\n", r.Target, r.Kind, oneLine(r.Detail))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d targets failed", failed, len(res))
	}
	return nil
}
