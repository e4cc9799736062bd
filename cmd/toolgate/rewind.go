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
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/signed"
	"github.com/toolgate/toolgate/timeline"
)

// steps is `toolgate steps ID`: every call of the run's chain with its
// status, approver and the point a rewind to it resets to.
func (c *cli) steps(ctx context.Context, args []string) error {
	fs := c.flags("steps")
	cn := c.connFlags(fs)
	asJSON := fs.Bool("json", false, "print the steps as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("steps needs one run id")
	}
	tg, closeFn, err := c.tgDial(ctx, cn)
	if err != nil {
		return err
	}
	defer closeFn()
	t, err := tg.Steps(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.json(t)
	}
	printSteps(c.stdout, t)
	return nil
}

// printSteps writes a chain's steps as a table, one call a line.
func printSteps(w io.Writer, t *timeline.Timeline) {
	fmt.Fprintf(w, "run %s: %d runs in its chain, %d steps\n", oneLine(t.WorkflowID), len(t.Runs), len(t.Steps))
	if err := t.Check(); err != nil {
		fmt.Fprintf(w, "(rewind and fork do not apply: %s)\n", oneLine(err.Error()))
	}
	fmt.Fprintf(w, "%-5s %-5s %-7s %-24s %-12s %-12s %s\n", "STEP", "TURN", "CALL", "TOOL", "STATUS", "APPROVER", "REWIND POINT")
	for _, s := range t.Steps {
		for _, cl := range s.Calls {
			tool := cl.Tool
			if cl.Destructive {
				tool += " (destructive)"
			}
			status := cl.Status
			if status == "" {
				status = "-"
			}
			approver := cl.Approver
			if approver == "" {
				approver = "-"
			}
			point := fmt.Sprintf("run %s event %d", shortID(s.RunID), s.ResetEvent)
			if cl.Fallback {
				point = "(a fallback: rewind to its call)"
			}
			fmt.Fprintf(w, "%-5d %-5d %-7s %-24s %-12s %-12s %s\n", s.Step, s.Turn, oneLine(cl.ID), oneLine(tool), oneLine(status), oneLine(approver), point)
		}
	}
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// rewind is `toolgate rewind ID --to CALL`: with --dry-run the preview and
// its digest; with --expect DIGEST the rewind, refused if the run moved on.
func (c *cli) rewind(ctx context.Context, args []string) error {
	fs := c.flags("rewind")
	cn := c.connFlags(fs)
	to := fs.String("to", "", "the call to rewind to: the run goes back to just before its planner step")
	dry := fs.Bool("dry-run", false, "print what the rewind would do and its digest; change nothing")
	expect := fs.String("expect", "", "the digest of the preview (--dry-run) this rewind is made from: refused if the run moved on since")
	asJSON := fs.Bool("json", false, "print the preview as JSON")
	who := c.operatorFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *to == "" {
		return errors.New("rewind needs one run id and --to CALL_ID")
	}
	if !*dry && *expect == "" {
		return errors.New("rewind needs --dry-run (to see what it would do) or --expect DIGEST (the preview's digest, to do it)")
	}
	tg, closeFn, err := c.tgDial(ctx, cn)
	if err != nil {
		return err
	}
	defer closeFn()
	if *dry {
		p, err := tg.RewindPreview(ctx, pos[0], *to)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.json(p)
		}
		printPreview(c.stdout, p)
		fmt.Fprintf(c.stdout, "to rewind: toolgate rewind %s --to %s --expect %s\n", oneLine(pos[0]), oneLine(*to), p.Digest)
		return nil
	}
	op, err := who()
	if err != nil {
		return err
	}
	r, err := tg.Rewind(ctx, pos[0], *to, *expect, op)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "rewound %s to just before %s (step %d) by %s: new run %s\n", oneLine(pos[0]), oneLine(*to), r.Preview.Step, oneLine(op.Name), r.RunID)
	return nil
}

// printPreview writes what a rewind would do.
func printPreview(w io.Writer, p timeline.Preview) {
	fmt.Fprintf(w, "rewind %s to just before %s (%s), step %d: run %s goes back to event %d\n",
		oneLine(p.WorkflowID), oneLine(p.To), oneLine(p.Tool), p.Step, p.BaseRunID, p.ResetEvent)
	fmt.Fprintf(w, "calls after the point, which the planner proposes again (or not): %s\n", orNone(strings.Join(p.Redo, ", ")))
	fmt.Fprintln(w, "side effects after the point that stay done (a rewind undoes nothing outside the run):")
	if len(p.Kept) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, k := range p.Kept {
		out := oneLineBytes(k.Result)
		if k.Error != "" {
			out = "failed after running: " + oneLine(k.Error)
		}
		fmt.Fprintf(w, "  %s %s %s -> %s\n", oneLine(k.ID), oneLine(k.Tool), oneLineBytes(k.Args), out)
	}
	fmt.Fprintln(w, "decisions dropped (a destructive call proposed again waits at the gate again):")
	if len(p.Dropped) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, d := range p.Dropped {
		fmt.Fprintf(w, "  %s %s %s by %s\n", oneLine(d.ID), oneLine(d.Tool), oneLine(d.Decision), oneLine(d.Approver))
	}
	fmt.Fprintln(w, "grants and revokes dropped (a dropped grant lets no call through; a dropped revoke puts its grant back in force):")
	if len(p.Grants) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, g := range p.Grants {
		fmt.Fprintf(w, "  %s\n", oneLine(g.String()))
	}
	fmt.Fprintln(w, "reads that run again if proposed:")
	if len(p.Reads) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, r := range p.Reads {
		fmt.Fprintf(w, "  %s %s %s\n", oneLine(r.ID), oneLine(r.Tool), oneLineBytes(r.Args))
	}
	fmt.Fprintf(w, "user messages after the point, dropped: %d\n", p.Messages)
	fmt.Fprintf(w, "digest: %s\n", p.Digest)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// forkWait bounds how long `toolgate fork` waits for the fork to take up
// its source (the worker reads the source's history, with retries).
const forkWait = 2 * time.Minute

// fork is `toolgate fork ID --at CALL --id NEW`: it starts the fork and
// waits until the run has taken up its source; a fork the run refuses exits
// non-zero with the run's refusal.
func (c *cli) fork(ctx context.Context, args []string) error {
	fs := c.flags("fork")
	cn := c.connFlags(fs)
	at := fs.String("at", "", "the call whose step the fork proposes again, from the state just before it")
	id := fs.String("id", "", "the fork's workflow id")
	argsJSON := fs.String("args", "", "replace the call's arguments with this JSON object in the fork")
	who := c.operatorFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *at == "" || *id == "" {
		return errors.New("fork needs one run id, --at CALL_ID and --id NEW_ID")
	}
	var raw json.RawMessage
	if *argsJSON != "" {
		if !json.Valid([]byte(*argsJSON)) {
			return fmt.Errorf("--args is not valid JSON: %s", oneLine(*argsJSON))
		}
		raw = json.RawMessage(*argsJSON)
	}
	op, err := who()
	if err != nil {
		return err
	}
	tg, closeFn, err := c.tgDial(ctx, cn)
	if err != nil {
		return err
	}
	defer closeFn()
	run, err := tg.Fork(ctx, pos[0], *at, *id, raw, op)
	if err != nil {
		return err
	}
	// The server takes the start before the run checks it: wait for the
	// run to take up its source, or to refuse.
	wctx, cancel := context.WithTimeout(ctx, forkWait)
	defer cancel()
	if err := tg.AwaitFork(wctx, run.GetID(), run.GetRunID()); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "forked %s at %s as %s (run %s): see toolgate status %s\n", oneLine(pos[0]), oneLine(*at), oneLine(*id), run.GetRunID(), oneLine(*id))
	return nil
}

// operatorFlags adds --as and --key, and returns how to read them.
func (c *cli) operatorFlags(fs interface {
	String(name, value, usage string) *string
}) func() (tgclient.Operator, error) {
	as := fs.String("as", envOr("USER", "operator"), "who rewinds or forks (kept in the trace; with --key, an approver holding an operators role of the worker's policy)")
	keyFile := fs.String("key", "", "sign the act with this private key (toolgate keys new); a worker with a policy takes no other")
	return func() (tgclient.Operator, error) {
		op := tgclient.Operator{Name: *as}
		if *keyFile != "" {
			k, err := signed.ReadPrivateKey(*keyFile)
			if err != nil {
				return op, err
			}
			op.Key = k
		}
		return op, nil
	}
}

// tgDial dials Temporal and returns toolgate's client on it, with the
// connection's converters and namespace.
func (c *cli) tgDial(ctx context.Context, cn *connect.Settings) (*tgclient.Client, func(), error) {
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return nil, nil, err
	}
	return tgclient.New(tc, tgclient.WithConnection(conn)), tc.Close, nil
}
