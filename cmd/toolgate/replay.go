package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

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
	var errs []error
	for _, f := range files {
		if err := replay.File(f, opts...); err != nil {
			errs = append(errs, err)
			fmt.Fprintf(c.stdout, "FAIL %s: %s\n", f, multiLine(err.Error()))
			continue
		}
		fmt.Fprintf(c.stdout, "ok   %s\n", f)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d histories do not replay: %s", len(errs), len(files), replayFailures(errs))
	}
	return nil
}

// replayFailures says why histories did not replay, by kind: the workflow
// code's incompatibility only for a nondeterminism.
func replayFailures(errs []error) string {
	kinds := []struct {
		kind error
		says string
	}{
		{replay.ErrUnreadable, "%d cannot be read (missing, unreadable, or not a history exported as JSON: see above)"},
		{replay.ErrNeedsKey, "%d with encrypted payloads and no key: pass --encryption-key-file FILE, the key file of the workers that wrote them"},
		{replay.ErrWrongKey, "%d whose payloads the key file given does not decrypt: pass the key file of the workers that wrote them"},
		{replay.ErrNondeterministic, "%d incompatible with this binary's workflow code: the workflow code changed incompatibly (use workflow.GetVersion)"},
		{replay.ErrRetired, "%d started under a rules version this build no longer runs: replay them with a build that runs it (docs/versions.md)"},
	}
	var parts []string
	counted := 0
	for _, k := range kinds {
		n := 0
		for _, err := range errs {
			if errors.Is(err, k.kind) {
				n++
			}
		}
		if n == len(errs) && k.kind == replay.ErrNondeterministic {
			return "the workflow code changed incompatibly (use workflow.GetVersion)"
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf(k.says, n))
			counted += n
		}
	}
	if other := len(errs) - counted; other > 0 {
		parts = append(parts, fmt.Sprintf("%d failed to replay (see above)", other))
	}
	return strings.Join(parts, "; ")
}
