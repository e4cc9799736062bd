package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/replay"
)

// keyFileFlag adds --encryption-key-file to a command that reads exported
// histories (replay, audit).
func keyFileFlag(fs *flag.FlagSet) *string {
	return fs.String("encryption-key-file", "", "decrypt the histories' payloads with this key file (the workers' --encryption-key-file)")
}

// replay is `toolgate replay FILE... [--encryption-key-file FILE]`: replay exported histories
// (`temporal workflow show --output json`) against this binary's workflow code.
func (c *cli) replay(ctx context.Context, args []string) error {
	fs := c.flags("replay")
	keyFile := keyFileFlag(fs)
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	var opts []replay.Option
	if *keyFile != "" {
		k, err := encryption.LoadKeyring(*keyFile)
		if err != nil {
			return err
		}
		opts = append(opts, replay.WithKeyring(k))
	}
	if len(files) == 0 {
		return errors.New("replay needs at least one history file (temporal workflow show --workflow-id ID --output json > FILE)")
	}
	var failed int
	for _, f := range files {
		if err := replay.File(f, opts...); err != nil {
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
