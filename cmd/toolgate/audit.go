package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/internal/text"
	"github.com/toolgate/toolgate/policy"
)

// audit is `toolgate audit HISTORY.json... [--policy FILE] [--encryption-key-file FILE]`: list every
// decision of exported histories (`temporal workflow show --output json`)
// with who made it, under which rule, and whether its signature verifies,
// and every executed call that needed a decision with what let it run
// (package audit), and every event whose writer matters (a workflow task
// answered, an activity closed, a reset, a termination) with the principal
// the server stamped on it. It fails (exit status 1) if a signed decision
// does not verify, a rule or grant decision is not backed by the policy,
// what a call ran with is not what was approved, such an event was written
// by neither a worker nor the server (or carries no principal where others
// do), or — with --policy — the policy a run recorded is not the file's.
// Without --policy it says it cannot vouch for the policy the run recorded
// (a note: the exit status is the checks'), and on a history no event of
// which carries a principal, that who wrote them cannot be checked.
//
// With --server it reads the histories from the server instead (every run,
// or the workflow ids given), checks each reset against the worker's
// record of it, and audits the authority namespace too (auditServer).
func (c *cli) audit(ctx context.Context, args []string) error {
	fs := c.flags("audit")
	policyFile := fs.String("policy", "", "verify against this policy file, kept apart from the runs, instead of the policy recorded in each history")
	server := fs.Bool("server", false, "read the runs (every run, or the WORKFLOW_IDs given) and the authority namespace from the server, instead of exported files")
	limit := fs.Int("limit", audit.MaxNamespaceExecutions, "with --server: read at most this many executions of each namespace")
	cn := c.connFlags(fs) // its --encryption-key-file decrypts the histories' payloads
	files, err := parse(fs, args)
	if err != nil {
		return err
	}
	var opts []audit.Option
	if cn.EncryptionKeyFile != "" {
		k, err := encryption.LoadKeyring(cn.EncryptionKeyFile)
		if err != nil {
			return err
		}
		opts = append(opts, audit.WithKeyring(k))
	}
	if len(files) == 0 && !*server {
		return errors.New("usage: toolgate audit HISTORY.json... [--policy FILE] (temporal workflow show --workflow-id ID --output json > HISTORY.json), " +
			"or toolgate audit --server [WORKFLOW_ID...] to read the runs and the authority namespace from the server")
	}
	var pol *policy.Policy
	if *policyFile != "" {
		if pol, err = policy.Load(*policyFile); err != nil {
			return err
		}
		warnPolicy(c.stderr, *policyFile, pol)
	}
	t := tally{policyFile: *policyFile}
	if *server {
		return c.auditServer(ctx, cn, files, *limit, pol, &t, opts)
	}
	for i, f := range files {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		rep, err := audit.File(f, pol, opts...)
		if err != nil {
			t.unreadable++
			fmt.Fprintf(c.stdout, "%s: %s\n", f, multiLine(err.Error()))
			continue
		}
		t.add(c.stdout, f, rep)
	}
	if len(files) > 1 {
		t.total(c.stdout, len(files), "history")
	}
	return t.err(len(files), "histories")
}

// tally adds up the audits of several histories.
type tally struct {
	policyFile                                                                                       string
	decisions, unverified, failed, executed, mismatched, unreadable, checked, unvouched, otherPolicy int
	principals                                                                                       bool
	// authority counts the events of the authority namespace written by
	// neither a worker nor the server (auditServer).
	authority int
}

// add prints one history's audit, named name, and counts it.
func (t *tally) add(w io.Writer, name string, rep audit.Report) {
	if t.policyFile != "" {
		rep.PolicyFrom = t.policyFile
	}
	printAudit(w, name, rep)
	t.decisions += len(rep.Entries)
	t.unverified += rep.Unverified()
	t.failed += len(rep.Failed())
	t.executed += len(rep.Executions)
	t.mismatched += len(rep.Mismatches())
	t.checked += len(rep.Writers)
	t.unvouched += len(rep.Unvouched())
	t.principals = t.principals || rep.Principals
	if len(rep.PolicyDiffers) > 0 {
		t.otherPolicy++
	}
}

// total prints the totals over n histories (what: "history", "run").
func (t *tally) total(w io.Writer, n int, what string) {
	fmt.Fprintf(w, "\ntotal: %s in %s, %d not verified; %s checked, %d not matching what let them run",
		text.Count(t.decisions, "decision"), text.Count(n-t.unreadable, what), t.unverified, text.Count(t.executed, "executed call"), t.mismatched)
	if t.principals {
		fmt.Fprintf(w, "; %s checked for who wrote them, %d by neither a worker nor the server", text.Count(t.checked, "event"), t.unvouched)
	}
	fmt.Fprintln(w)
}

// err is the audit's outcome over n histories: exit status 1 when any
// check failed or a history could not be read.
func (t *tally) err(n int, what string) error {
	var fails []string
	if t.failed > 0 {
		fails = append(fails, text.Count(t.failed, "decision")+" not verified")
	}
	if t.mismatched > 0 {
		fails = append(fails, text.Count(t.mismatched, "executed call")+" not matching what let it run")
	}
	if t.unvouched > 0 {
		fails = append(fails, text.Count(t.unvouched, "event")+" written by neither a worker nor the server")
	}
	if t.authority > 0 {
		fails = append(fails, text.Count(t.authority, "event")+" of the authority namespace written by neither a worker nor the server")
	}
	if t.otherPolicy > 0 {
		fails = append(fails, fmt.Sprintf("%s held to a policy other than %s", text.Count(t.otherPolicy, "run"), t.policyFile))
	}
	switch {
	case len(fails) > 0:
		return &exitError{code: 1, err: fmt.Errorf("audit failed: %s", strings.Join(fails, ", "))}
	case t.unreadable > 0:
		return &exitError{code: 1, err: fmt.Errorf("audit: %d of %d %s could not be read", t.unreadable, n, what)}
	}
	return nil
}

// printAudit prints one history's decisions as a table, and their count.
func printAudit(w io.Writer, file string, rep audit.Report) {
	fmt.Fprintf(w, "%s: run %s\n", file, oneLine(rep.WorkflowID))
	switch {
	case rep.Policy == nil:
		fmt.Fprintln(w, "no policy: decisions were unauthenticated")
	case rep.PolicyFrom == "history":
		fmt.Fprintf(w, "policy: recorded in the history (approvers %s)\n", approverNames(rep.Policy))
	case rep.Recorded && len(rep.PolicyDiffers) == 0:
		fmt.Fprintf(w, "policy: %s (approvers %s), the one the history records\n", rep.PolicyFrom, approverNames(rep.Policy))
	case rep.Recorded:
		fmt.Fprintf(w, "policy: %s (approvers %s), not the one the history records\n", rep.PolicyFrom, approverNames(rep.Policy))
	default:
		fmt.Fprintf(w, "policy: %s (approvers %s); the history records none: the run's decisions were unauthenticated\n", rep.PolicyFrom, approverNames(rep.Policy))
	}
	if len(rep.PolicyDiffers) > 0 {
		fmt.Fprintf(w, "the run was NOT held to %s, it FAILS the audit: %s\n", oneLine(rep.PolicyFrom), truncate(oneLine(strings.Join(rep.PolicyDiffers, "; ")), 2000))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(rep.Entries) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tKIND\tVIA\tCALL\tAPPROVER\tRULE\tDIGEST\tRESULT\tCHECK")
		for _, e := range rep.Entries {
			kind := e.Kind
			if e.EditedDigest != "" {
				kind += " (edit " + short(e.EditedDigest) + ")"
			}
			result, width := e.Result, 60
			if e.Kind == audit.KindGrant && e.Tool != "" {
				result += " " + e.Tool
			}
			switch e.Kind {
			case audit.KindRewind, audit.KindFork:
				width = 160 // they name runs and event ids, and a fork its arguments
			case audit.KindReset:
				width = 240 // and the reason whoever reset the run gave
			}
			check := "verified"
			if e.Channel != "" {
				check = "verified: by link (" + e.Channel + "), signed with the policy's via_key"
			}
			if !e.Verified {
				check = "NOT VERIFIED: " + e.Problem
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.At.UTC().Format("2006-01-02T15:04:05.000Z"),
				oneLine(kind), e.Via, cell(e.CallID, 24), cell(e.Approver, 40), cell(e.Rule, 40), dash(short(e.Digest)),
				cell(result, width), truncate(oneLine(check), 300))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "%s, %d not verified", text.Count(len(rep.Entries), "decision"), rep.Unverified())
	if n := len(rep.Failed()); n > 0 {
		fmt.Fprintf(w, ", %d of them FAIL the audit", n)
	}
	fmt.Fprintln(w)
	printExecutions(w, rep)
	printWriters(w, rep)
}

// printWriters prints who wrote the events whose writer matters, by the
// server's word: one line when each was a worker or the server, else a
// table of the others. A history with no principal prints nothing here (its
// note says so).
func printWriters(w io.Writer, rep audit.Report) {
	if !rep.Principals {
		return
	}
	bad := rep.Unvouched()
	if len(bad) == 0 {
		fmt.Fprintf(w, "%s checked for who wrote them (workflow tasks answered, activities closed, resets, terminations): each by a worker or the server\n",
			text.Count(len(rep.Writers), "event"))
		return
	}
	fmt.Fprintln(w, "events written by neither a worker nor the server (by the server's principal):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT\tTYPE\tPRINCIPAL\tCHECK")
	for _, x := range bad {
		check := "NOT A WORKER: " + x.Problem
		if x.Gap {
			check = "NO PRINCIPAL: " + x.Problem
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", x.EventID, x.EventType, cell(x.Principal(), 80), truncate(oneLine(check), 1200))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s checked for who wrote them, %d of them by neither a worker nor the server: they FAIL the audit\n", text.Count(len(rep.Writers), "event"), len(bad))
}

// printExecutions prints the calls the run executed that needed a decision,
// each with what let it run and whether what ran is what was approved.
func printExecutions(w io.Writer, rep audit.Report) {
	if len(rep.Executions) == 0 {
		fmt.Fprintln(w, "no executed call needed a decision")
		return
	}
	fmt.Fprintln(w, "executed calls, each matched to what let it run:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tCALL\tTOOL\tRAN WITH\tDIGEST\tLET THROUGH BY\tCHECK")
	unbound := 0
	for _, x := range rep.Executions {
		at := "-"
		if !x.At.IsZero() {
			at = x.At.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		check := "matches: " + x.Basis
		switch {
		case x.Unbound:
			check = "NOT TIED: " + x.Problem
			unbound++
		case !x.Matched:
			check = "MISMATCH: " + x.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", at, cell(x.CallID, 24), cell(x.Tool, 60), cell(string(x.Args), 80),
			dash(short(x.Digest)), cell(x.By, 40), truncate(oneLine(check), 1200))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s checked", text.Count(len(rep.Executions), "executed call"))
	if unbound > 0 {
		fmt.Fprintf(w, ", %d not tied (the history cannot tell)", unbound)
	}
	if n := len(rep.Mismatches()); n > 0 {
		fmt.Fprintf(w, ", %d of them do NOT match what let them run: they FAIL the audit", n)
	}
	fmt.Fprintln(w)
}

// cell is text that came from a run, escaped and cut for one table cell.
func cell(s string, n int) string { return dash(truncate(oneLine(s), n)) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// short is a digest's first 12 characters, escaped.
func short(d string) string {
	if len(d) > 12 {
		d = d[:12]
	}
	return oneLine(d)
}

func approverNames(p *policy.Policy) string {
	names := make([]string, 0, len(p.Approvers))
	for n := range p.Approvers {
		names = append(names, oneLine(n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
