package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/workflows"
)

// Every text of a run printed here goes through oneLine (or block): see
// escape.go.

func printState(w io.Writer, s workflows.State) {
	fmt.Fprintf(w, "status: %s\n", oneLine(s.Status))
	if s.Turn > 0 {
		fmt.Fprintf(w, "turn:   %d (calls so far: %d)\n", s.Turn, s.Calls)
	}
	next := make([]string, len(s.Next))
	for i, n := range s.Next {
		next[i] = oneLine(n)
	}
	fmt.Fprintf(w, "next:   %s\n", strings.Join(next, ", "))
	for _, it := range s.Interrupts {
		printInterrupt(w, "", it)
	}
	if s.Memo.Entries+int(s.Memo.Hits+s.Memo.Misses) > 0 {
		fmt.Fprintf(w, "memo:   %d entries, %d hits, %d misses\n", s.Memo.Entries, s.Memo.Hits, s.Memo.Misses)
	}
	if s.Answer != "" {
		fmt.Fprintf(w, "answer: %s\n", block(s.Answer, "        "))
	}
	if s.BlockedOn != nil {
		fmt.Fprintf(w, "blocked on: %s %s (%s)\n", oneLine(s.BlockedOn.Tool), oneLineBytes(s.BlockedOn.CallArgs), oneLine(s.BlockedOn.CallID))
	}
	if s.Error != "" {
		fmt.Fprintf(w, "error:  %s\n", block(s.Error, "        "))
	}
	for _, r := range s.Refused {
		fmt.Fprintf(w, "refused %s %s: %s\n", oneLine(r.Signal), oneLine(r.CallID), oneLine(r.Error))
	}
	if s.Policy {
		fmt.Fprintln(w, "policy: the worker's policy holds this run: decisions must be signed (--as NAME --key FILE)")
	}
	if s.RequestedBy != "" {
		fmt.Fprintf(w, "requested by: %s (who may approve none of its calls)\n", oneLine(s.RequestedBy))
	}
	if len(s.ForkedBy) > 0 {
		fmt.Fprintf(w, "forked by: %s (who may approve none of its calls either)\n", oneLine(strings.Join(s.ForkedBy, ", ")))
	}
	for _, g := range s.Grants {
		printGrant(w, g)
	}
}

// printGrant prints one grant of a run.
func printGrant(w io.Writer, g workflows.Grant) {
	line := fmt.Sprintf("grant %s: %s by %s, used %d", oneLine(g.ID), oneLine(g.Tool), oneLine(g.By), g.Used)
	if g.Uses > 0 {
		line += fmt.Sprintf(" of %d", g.Uses)
	}
	if g.When != "" {
		line += ", when " + oneLine(g.When)
	}
	if !g.Until.IsZero() {
		line += ", until " + g.Until.Format(time.RFC3339)
	}
	if g.RevokedBy != "" {
		line += ", revoked by " + oneLine(g.RevokedBy)
	}
	fmt.Fprintln(w, line)
}

func printInterrupt(w io.Writer, run string, it workflows.Interrupt) {
	if run != "" {
		run = oneLine(run) + " "
	}
	fmt.Fprintf(w, "waiting: %s%s %s %s (%s: %s) since %s, expires %s, digest %s\n", run, oneLine(it.CallID), oneLine(it.Tool),
		oneLineBytes(it.CallArgs), oneLine(string(it.Kind)), oneLine(it.Reason), it.RequestedAt.Format(time.RFC3339),
		it.ExpiresAt.Format(time.RFC3339), oneLine(it.ArgsDigest))
	if it.Needs != nil {
		who := "any approver"
		if len(it.Needs.Roles) > 0 {
			who = "role " + oneLine(strings.Join(it.Needs.Roles, " or "))
		}
		rule := "the tool's approvers"
		if it.Rule != "" {
			rule = "rule " + oneLine(it.Rule)
		}
		fmt.Fprintf(w, "         needs %d of %s (%s); approved so far: %d", it.Needs.Count, who, rule, len(it.ApprovedBy))
		if len(it.ApprovedBy) > 0 {
			fmt.Fprintf(w, " (%s)", oneLine(strings.Join(it.ApprovedBy, ", ")))
		}
		fmt.Fprintln(w)
	}
	if it.EditedBy != "" {
		fmt.Fprintf(w, "         edited by %s from %s\n", oneLine(it.EditedBy), oneLineBytes(it.OriginalArgs))
	}
}

func printTrace(w io.Writer, trace []workflows.TraceRecord) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTURN\tCALL\tTOOL\tSTATUS\tDETAIL")
	for _, r := range trace {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Seq, r.Turn, oneLine(r.CallID), oneLine(r.Tool), oneLine(r.Status), detail(r))
	}
	_ = tw.Flush()
}

// detail is the one-line gist of a trace record (escaped: see escape.go).
func detail(r workflows.TraceRecord) string {
	var parts []string
	parts = append(parts, oneLineBytes(r.Args))
	if len(r.OriginalArgs) > 0 {
		parts = append(parts, "(edited from "+oneLineBytes(r.OriginalArgs)+")")
	}
	if r.Approver != "" {
		parts = append(parts, "by "+oneLine(r.Approver))
	}
	if r.Rule != "" {
		parts = append(parts, "rule "+oneLine(r.Rule))
	}
	if r.Reason != "" {
		parts = append(parts, oneLine(r.Reason))
	}
	if r.Attempts > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", r.Attempts))
	}
	if r.Error != "" {
		parts = append(parts, "error: "+oneLine(r.Error))
	}
	if len(r.Result) > 0 {
		parts = append(parts, "→ "+truncate(oneLineBytes(r.Result), 120))
	}
	return strings.Join(parts, "  ")
}

// printDecision prints the answer to an approve or reject.
func printDecision(w io.Writer, res workflows.DecisionResult) {
	fmt.Fprintf(w, "%s %s (%s) by %s", oneLine(res.Decision), oneLine(res.CallID), oneLine(res.Tool), oneLine(res.Approver))
	if res.Needed > 1 {
		fmt.Fprintf(w, ": %d of %d approvals (%s)", len(res.ApprovedBy), res.Needed, oneLine(strings.Join(res.ApprovedBy, ", ")))
		if res.Decision == workflows.DecisionCounted {
			fmt.Fprint(w, "; it waits for more")
		}
	}
	fmt.Fprintln(w)
}

// block is s escaped for a text block whose first line follows a label: its
// further lines are indented by indent.
func block(s, indent string) string {
	return strings.ReplaceAll(multiLine(s), "\n", "\n"+indent)
}

func printRecord(w io.Writer, r workflows.TraceRecord) {
	fmt.Fprintf(w, "  %-4s %-16s %-11s %s\n", oneLine(r.CallID), oneLine(r.Tool), oneLine(r.Status), detail(r))
}

func printInbox(w io.Writer, items []tgclient.PendingCall) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no run is waiting for a decision")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tCALL\tTOOL\tARGUMENTS\tKIND\tWAITING SINCE\tEXPIRES")
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(it.RunID), oneLine(it.CallID), oneLine(it.Tool),
			oneLineBytes(it.CallArgs), oneLine(string(it.Kind)),
			it.RequestedAt.Format(time.RFC3339), it.ExpiresAt.Format(time.RFC3339))
	}
	_ = tw.Flush()
}

// follow prints a run's trace as it grows until the run ends. Each time a
// call starts waiting for a human, it prints the interrupt and calls onWait
// (nil: only print how to decide).
// address and namespace are where the run is, for the instructions printed
// when nobody decides here.
func (c *cli) follow(ctx context.Context, tc client.Client, cn *connect.Conn, id string, onWait func(workflows.Interrupt) error) (workflows.RunResult, error) {
	cl := tgclient.New(tc)
	shown := 0
	asked := map[string]bool{}
	for {
		s, err := look(ctx, cl, id)
		if err != nil {
			return workflows.RunResult{}, err
		}
		for _, r := range s.Trace {
			if r.Seq > shown {
				printRecord(c.stdout, r)
				shown = r.Seq
			}
		}
		if s.Result != nil {
			fmt.Fprintf(c.stdout, "run %s: %s\n", oneLine(id), oneLine(s.Result.Status))
			if s.Result.Answer != "" {
				fmt.Fprintf(c.stdout, "answer: %s\n", block(s.Result.Answer, "        "))
			}
			if s.Result.Error != "" {
				fmt.Fprintf(c.stdout, "error: %s\n", block(s.Result.Error, "       "))
			}
			return *s.Result, nil
		}
		for _, it := range s.State.Interrupts {
			key := fmt.Sprintf("%s@%s", it.CallID, it.RequestedAt.Format(time.RFC3339Nano))
			if asked[key] {
				continue
			}
			asked[key] = true
			fmt.Fprintf(c.stdout, "\n%s waits for a human: %s %s — %s\n", oneLine(it.CallID), oneLine(it.Tool), oneLineBytes(it.CallArgs), oneLine(it.Reason))
			if onWait == nil {
				printHowToDecide(c.stdout, cn, id, it, s.State.Policy)
				continue
			}
			if err := onWait(it); err != nil {
				return workflows.RunResult{}, err
			}
		}
		select {
		case <-ctx.Done():
			return workflows.RunResult{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func printHowToDecide(w io.Writer, cn *connect.Conn, id string, it workflows.Interrupt, signedOnly bool) {
	extra := `,"args_digest":"` + oneLine(it.ArgsDigest) + `"`
	if it.Kind == workflows.KindInterrupt {
		extra += `,"kind":"interrupt"`
	}
	at := fmt.Sprintf("--address %s --namespace %s", cn.Address(), cn.Namespace())
	if signedOnly {
		fmt.Fprintf(w, `decide from another shell (the worker's policy takes signed decisions only):
  toolgate approve %[1]s %[2]s --as NAME --key NAME.key %[3]s
  toolgate reject  %[1]s %[2]s --reason TEXT --as NAME --key NAME.key %[3]s
`, oneLine(id), oneLine(it.CallID), oneLine(at))
		return
	}
	fmt.Fprintf(w, `decide from another shell:
  toolgate approve %[1]s %[2]s --as NAME %[4]s
  toolgate reject  %[1]s %[2]s --reason TEXT --as NAME %[4]s
or with the stock temporal CLI:
  temporal workflow signal %[4]s --workflow-id %[1]s --name approve --input '{"call_id":"%[2]s","approver":"NAME"%[3]s}'
`, oneLine(id), oneLine(it.CallID), extra, oneLine(at))
}
