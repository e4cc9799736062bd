package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/ledger"
	"github.com/toolgate/toolgate/signed"
)

// pauseCmd is `toolgate pause TOOL|--all --reason TEXT --as NAME --key FILE`
// and, with pause false, `toolgate unpause TOOL|--all …`: the fleet's kill
// switch, a signed act of an operator of the worker's policy, kept by the
// fleet ledger of the task queue.
func (c *cli) pauseCmd(pause bool) func(context.Context, []string) error {
	name := "unpause"
	if pause {
		name = "pause"
	}
	return func(ctx context.Context, args []string) error {
		fs := c.flags(name)
		cn := c.connFlags(fs)
		tq := taskQueueFlag(fs)
		all := fs.Bool("all", false, "every destructive tool")
		reason := fs.String("reason", "", "why (told to every run it stops; required to pause)")
		as := fs.String("as", "", "the operator who signs it: an approver holding one of the policy's operators roles (required)")
		keyFile := fs.String("key", "", "their private key file (required)")
		asJSON := fs.Bool("json", false, "print the ledger's view as JSON")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		target := ledger.AllTools
		switch {
		case *all && len(pos) == 0:
		case !*all && len(pos) == 1 && pos[0] != "":
			target = pos[0]
		default:
			return fmt.Errorf("%s needs one tool name, or --all for every destructive tool", name)
		}
		if *as == "" || *keyFile == "" {
			return fmt.Errorf("--as NAME and --key FILE are required: a %s is an operator's signed act", name)
		}
		if pause && strings.TrimSpace(*reason) == "" {
			return errors.New("--reason is required: every run the pause stops is told why")
		}
		key, err := signed.ReadPrivateKey(*keyFile)
		if err != nil {
			return err
		}
		tc, conn, err := c.dial(ctx, cn)
		if err != nil {
			return err
		}
		defer tc.Close()
		cl := tgclient.New(tc, tgclient.WithConnection(conn))
		var v ledger.View
		if pause {
			v, err = cl.Pause(ctx, *tq, target, *reason, *as, key)
		} else {
			v, err = cl.Unpause(ctx, *tq, target, *reason, *as, key)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(c.stdout).Encode(v)
		}
		what := oneLine(target)
		if target == ledger.AllTools {
			what = "every destructive tool"
		}
		if pause {
			fmt.Fprintf(c.stdout, "paused %s on task queue %s: no run starts it until toolgate unpause\n", what, oneLine(*tq))
		} else {
			fmt.Fprintf(c.stdout, "unpaused %s on task queue %s\n", what, oneLine(*tq))
		}
		printPauses(c.stdout, v.Pauses)
		return nil
	}
}

// guards is `toolgate guards [--json]`: each guard of the fleet ledger, its
// use within its window, and the tools paused.
func (c *cli) guards(ctx context.Context, args []string) error {
	fs := c.flags("guards")
	cn := c.connFlags(fs)
	tq := taskQueueFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	v, ok, err := tgclient.New(tc, tgclient.WithConnection(conn)).Guards(ctx, *tq)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(v)
	}
	if !ok {
		fmt.Fprintf(c.stdout, "the fleet ledger of task queue %s has not started: no run has reserved a call, and nothing is paused\n", oneLine(*tq))
		return nil
	}
	printGuards(c.stdout, v)
	return nil
}

// printGuards writes the ledger's view: a line per guard and scope, then
// the pauses.
func printGuards(w io.Writer, v ledger.View) {
	if !v.Policy {
		fmt.Fprintln(w, "the fleet ledger has no policy: it keeps no guard (start workers with --policy)")
	}
	if len(v.Guards) == 0 && v.Policy {
		fmt.Fprintln(w, "the worker's policy has no guards")
	}
	for _, g := range v.Guards {
		fmt.Fprintf(w, "%s  %s  limit %d per %s (per %s, past it: %s)\n", oneLine(g.ID), g.Kind, g.Limit, g.Window, g.Per, g.Exceed)
		if len(g.Scopes) == 0 {
			fmt.Fprintln(w, "    nothing counted within the window")
		}
		for _, s := range g.Scopes {
			fmt.Fprintf(w, "    %s: %d committed, %d reserved, %d leased, %d of %d used\n", oneLine(s.Scope), s.Committed, s.Reserved, s.Leased, s.Committed+s.Reserved+s.Leased, g.Limit)
		}
	}
	fmt.Fprintf(w, "%d reservations held, %d workers holding leases\n", v.Entries, v.Leases)
	if len(v.Unseen) > 0 {
		fmt.Fprintf(w, "not yet told of the latest pause (within a second, or their leases lapse): %s\n", oneLine(strings.Join(v.Unseen, ", ")))
	}
	printPauses(w, v.Pauses)
}

// printPauses writes the tools paused fleet-wide, or that none is.
func printPauses(w io.Writer, ps []ledger.Pause) {
	if len(ps) == 0 {
		fmt.Fprintln(w, "nothing is paused")
		return
	}
	for _, p := range ps {
		what := oneLine(p.Tool)
		if p.Tool == ledger.AllTools {
			what = "every destructive tool"
		}
		fmt.Fprintf(w, "PAUSED %s by %s at %s: %s\n", what, oneLine(p.By), p.At.UTC().Format(time.RFC3339), oneLine(p.Reason))
	}
}
