package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/workflows"
)

func printState(w io.Writer, s workflows.State) {
	fmt.Fprintf(w, "status: %s\n", s.Status)
	if s.Turn > 0 {
		fmt.Fprintf(w, "turn:   %d (calls so far: %d)\n", s.Turn, s.Calls)
	}
	fmt.Fprintf(w, "next:   %s\n", strings.Join(s.Next, ", "))
	for _, it := range s.Interrupts {
		printInterrupt(w, "", it)
	}
	if s.Memo.Entries+int(s.Memo.Hits+s.Memo.Misses) > 0 {
		fmt.Fprintf(w, "memo:   %d entries, %d hits, %d misses\n", s.Memo.Entries, s.Memo.Hits, s.Memo.Misses)
	}
	if s.Answer != "" {
		fmt.Fprintf(w, "answer: %s\n", s.Answer)
	}
	if s.BlockedOn != nil {
		fmt.Fprintf(w, "blocked on: %s %s (%s)\n", s.BlockedOn.Tool, s.BlockedOn.CallArgs, s.BlockedOn.CallID)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "error:  %s\n", s.Error)
	}
	for _, r := range s.Refused {
		fmt.Fprintf(w, "refused %s %s: %s\n", r.Signal, r.Input.CallID, r.Error)
	}
}

func printInterrupt(w io.Writer, run string, it workflows.Interrupt) {
	if run != "" {
		run += " "
	}
	fmt.Fprintf(w, "waiting: %s%s %s %s (%s: %s) since %s, expires %s, digest %s\n", run, it.CallID, it.Tool, it.CallArgs,
		it.Kind, it.Reason, it.RequestedAt.Format(time.RFC3339), it.ExpiresAt.Format(time.RFC3339), it.ArgsDigest)
}

func printTrace(w io.Writer, trace []workflows.TraceRecord) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTURN\tCALL\tTOOL\tSTATUS\tDETAIL")
	for _, r := range trace {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Seq, r.Turn, r.CallID, r.Tool, r.Status, detail(r))
	}
	_ = tw.Flush()
}

// detail is the one-line gist of a trace record.
func detail(r workflows.TraceRecord) string {
	var parts []string
	parts = append(parts, string(r.Args))
	if r.Approver != "" {
		parts = append(parts, "by "+r.Approver)
	}
	if r.Reason != "" {
		parts = append(parts, r.Reason)
	}
	if r.Attempts > 1 {
		parts = append(parts, fmt.Sprintf("%d attempts", r.Attempts))
	}
	if r.Error != "" {
		parts = append(parts, "error: "+r.Error)
	}
	if len(r.Result) > 0 {
		res := string(r.Result)
		if len(res) > 120 {
			res = res[:120] + "…"
		}
		parts = append(parts, "→ "+res)
	}
	return strings.Join(parts, "  ")
}

func printRecord(w io.Writer, r workflows.TraceRecord) {
	fmt.Fprintf(w, "  %-4s %-16s %-11s %s\n", r.CallID, r.Tool, r.Status, detail(r))
}

func printInbox(w io.Writer, items []inboxItem) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no run is waiting for a decision")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tCALL\tTOOL\tARGUMENTS\tKIND\tWAITING SINCE\tEXPIRES")
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.RunID, it.CallID, it.Tool, it.CallArgs, it.Kind,
			it.RequestedAt.Format(time.RFC3339), it.ExpiresAt.Format(time.RFC3339))
	}
	_ = tw.Flush()
}

// follow prints a run's trace as it grows until the run ends. Each time a
// call starts waiting for a human, it prints the interrupt and calls onWait
// (nil: only print how to decide).
// address and namespace are where the run is, for the instructions printed
// when nobody decides here.
func (c *cli) follow(ctx context.Context, cl client.Client, cn *conn, id string, onWait func(workflows.Interrupt) error) (workflows.RunResult, error) {
	shown := 0
	asked := map[string]bool{}
	for {
		s, err := c.look(ctx, cl, id)
		if err != nil {
			return workflows.RunResult{}, err
		}
		for _, r := range s.trace {
			if r.Seq > shown {
				printRecord(c.stdout, r)
				shown = r.Seq
			}
		}
		if s.result != nil {
			fmt.Fprintf(c.stdout, "run %s: %s\n", id, s.result.Status)
			if s.result.Answer != "" {
				fmt.Fprintf(c.stdout, "answer: %s\n", s.result.Answer)
			}
			if s.result.Error != "" {
				fmt.Fprintf(c.stdout, "error: %s\n", s.result.Error)
			}
			return *s.result, nil
		}
		for _, it := range s.state.Interrupts {
			key := fmt.Sprintf("%s@%s", it.CallID, it.RequestedAt.Format(time.RFC3339Nano))
			if asked[key] {
				continue
			}
			asked[key] = true
			fmt.Fprintf(c.stdout, "\n%s waits for a human: %s %s — %s\n", it.CallID, it.Tool, it.CallArgs, it.Reason)
			if onWait == nil {
				printHowToDecide(c.stdout, cn, id, it)
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

func printHowToDecide(w io.Writer, cn *conn, id string, it workflows.Interrupt) {
	kind := ""
	if it.Kind == workflows.KindInterrupt {
		kind = `,"kind":"interrupt"`
	}
	at := fmt.Sprintf("--address %s --namespace %s", cn.address, cn.namespace)
	fmt.Fprintf(w, `decide from another shell:
  toolgate approve %[1]s %[2]s --as NAME %[4]s
  toolgate reject  %[1]s %[2]s --reason TEXT --as NAME %[4]s
or with the stock temporal CLI:
  temporal workflow signal %[4]s --workflow-id %[1]s --name approve --input '{"call_id":"%[2]s","approver":"NAME"%[3]s}'
`, id, it.CallID, kind, at)
}
