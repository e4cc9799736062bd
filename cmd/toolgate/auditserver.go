package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/connect"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// auditServer is `toolgate audit --server [WORKFLOW_ID...]`: it audits every
// run the runs' namespace holds (each execution of AgentRun, or those of the
// workflow ids given) as `toolgate audit` audits an exported history, with
// each reset checked against the record the worker that carried it out made
// in the authority namespace; then every execution of the authority
// namespace, where each event a call wrote must be a worker's or the
// server's. It fails (exit status 1) on any event, in either namespace,
// that neither a worker nor a signature vouches for.
func (c *cli) auditServer(ctx context.Context, cn *connect.Settings, ids []string, limit int, pol *policy.Policy, t *tally, opts []audit.Option) error {
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	ac, err := conn.DialAuthority(ctx, tc, nil)
	if err != nil {
		return err
	}
	opts = append(opts, audit.WithRewindRecords(func(reset string) (workflows.RewindRecord, error) {
		var rec workflows.RewindRecord
		err := authority.Lookup(ctx, ac.Client, ac.Namespace, workflows.RewindRecordPrefix+reset, &rec)
		return rec, err
	}))
	runs, truncated, err := audit.Runs(ctx, tc, conn.Options.Namespace, ids, limit, pol, opts...)
	if err != nil {
		return err
	}
	n := len(runs)
	for i, r := range runs {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		name := oneLine(r.WorkflowID + "/" + r.RunID)
		if r.Err != nil {
			t.unreadable++
			fmt.Fprintf(c.stdout, "%s: %s\n", name, multiLine(r.Err.Error()))
			continue
		}
		t.add(c.stdout, name, r.Report)
	}
	for _, id := range ids {
		if !slices.ContainsFunc(runs, func(r audit.RunAudit) bool { return r.WorkflowID == id }) {
			n++
			t.unreadable++
			fmt.Fprintf(c.stdout, "%s: no run of this workflow id in namespace %s\n", oneLine(id), conn.Options.Namespace)
		}
	}
	if truncated {
		fmt.Fprintf(c.stdout, "note: namespace %s holds more runs than --limit %d: only the first %d were read\n", conn.Options.Namespace, limit, limit)
	}
	t.total(c.stdout, n, "run")
	rep, err := audit.Namespace(ctx, tc, ac.Namespace, limit)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	printNamespace(c.stdout, rep)
	t.authority = len(rep.Unvouched)
	return t.err(n, "runs")
}

// maxNamespaceLines bounds the events printNamespace lists.
const maxNamespaceLines = 200

// printNamespace prints a namespace's audit: the events written by neither
// a worker nor the server, if any.
func printNamespace(w io.Writer, rep audit.NamespaceReport) {
	fmt.Fprintf(w, "authority namespace %s: %s read\n", oneLine(rep.Namespace), text.Count(rep.Executions, "execution"))
	if rep.Executions == 0 {
		fmt.Fprintln(w, "nothing was written there yet (no use claimed, no link or rewind recorded, no fleet ledger)")
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if !rep.Principals {
		return
	}
	if len(rep.Unvouched) == 0 {
		fmt.Fprintf(w, "%s written by a call, each by a worker or the server\n", text.Count(rep.Events, "event"))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tEVENT\tTYPE\tPRINCIPAL\tCHECK")
	for i, x := range rep.Unvouched {
		if i == maxNamespaceLines {
			fmt.Fprintf(tw, "…\tand %d more\t\t\t\n", len(rep.Unvouched)-i)
			break
		}
		check := "NOT A WORKER: " + x.Problem
		if x.Gap {
			check = "NO PRINCIPAL: " + x.Problem
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", cell(x.WorkflowID, 80), x.EventID, x.EventType, cell(x.Principal(), 80), truncate(oneLine(check), 600))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s written by a call, %d of them by neither a worker nor the server: they FAIL the audit\n", text.Count(rep.Events, "event"), len(rep.Unvouched))
}
