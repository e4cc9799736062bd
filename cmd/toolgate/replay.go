package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/replay"
)

// replay is `toolgate replay FILE...`: replay exported histories
// (`temporal workflow show --output json`) against this binary's workflow code.
func (c *cli) replay(ctx context.Context, args []string) error {
	fs := c.flags("replay")
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("replay needs at least one history file (temporal workflow show --workflow-id ID --output json > FILE)")
	}
	var failed int
	for _, f := range files {
		if err := replay.File(f); err != nil {
			failed++
			fmt.Fprintf(c.stdout, "FAIL %s: %s\n", f, multiLine(err.Error()))
			continue
		}
		fmt.Fprintf(c.stdout, "ok   %s\n", f)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d histories do not replay: the workflow code changed incompatibly (use workflow.GetVersion)", failed, len(files))
	}
	return nil
}
