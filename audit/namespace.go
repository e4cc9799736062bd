package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/workflows"
)

// This file audits a whole namespace by the server's word: the authority
// namespace, which only workers write (package authority). Every event a
// call made the server write carries the caller's principal (the server
// stamps each event of the call's transaction); events of the server's own
// timers carry none. So in the authority namespace every event with a
// principal must be a worker's or the server's: a marker started, a ledger
// signalled or terminated, a workflow task answered by anyone else is named.

// NamespaceEvent is one event of a namespace's execution and who wrote it.
type NamespaceEvent struct {
	WorkflowID   string
	RunID        string
	WorkflowType string
	Writer
}

// NamespaceReport is the audit of every execution a namespace holds.
type NamespaceReport struct {
	Namespace string
	// Executions counts the executions read (open and closed, within the
	// namespace's retention), Events the events checked.
	Executions int
	Events     int
	// Principals: some event carries a principal. Without any, who wrote
	// the namespace cannot be told (Notes says so).
	Principals bool
	// Unvouched are the events written by neither a worker nor the server,
	// and those that carry no principal though only a call writes them.
	Unvouched []NamespaceEvent
	// Truncated: the namespace holds more executions than the audit read.
	Truncated bool
	Notes     []string
}

// MaxNamespaceExecutions bounds the executions Namespace reads by default.
const MaxNamespaceExecutions = 100_000

// Namespace audits every execution of namespace ns, read over c's
// connection (at most limit of them; 0: MaxNamespaceExecutions): each event
// carrying a principal must be a worker's or the server's, and each event
// only a call writes (a workflow task answered, an activity closed) must
// carry one once any event does. A person who may write the namespace —
// an admin of it, or anyone on a server whose authorizer lets them — is
// named with what they did.
func Namespace(ctx context.Context, c client.Client, ns string, limit int) (NamespaceReport, error) {
	if limit <= 0 {
		limit = MaxNamespaceExecutions
	}
	rep := NamespaceReport{Namespace: ns}
	var gaps []NamespaceEvent
	var token []byte
	for {
		page, err := c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: ns, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return rep, fmt.Errorf("listing the executions of namespace %s: %w", ns, err)
		}
		for _, ex := range page.GetExecutions() {
			if rep.Executions >= limit {
				rep.Truncated = true
				break
			}
			rep.Executions++
			run := ex.GetExecution()
			evs, err := historyOf(ctx, c, ns, run)
			if err != nil {
				return rep, err
			}
			for _, ev := range evs {
				ne := NamespaceEvent{WorkflowID: run.GetWorkflowId(), RunID: run.GetRunId(), WorkflowType: ex.GetType().GetName(),
					Writer: Writer{At: ev.GetEventTime().AsTime(), EventID: ev.GetEventId(), EventType: eventName(ev.GetEventType())}}
				p := ev.GetPrincipal()
				if p == nil {
					if checkedAs(ev) == always {
						rep.Events++
						ne.Gap = true
						ne.What = fmt.Sprintf("%s of %s %s", words(ne.EventType), ne.WorkflowType, ne.WorkflowID)
						ne.Problem = ne.What + " carries no principal, though only a call writes it: who wrote it cannot be told"
						gaps = append(gaps, ne)
					}
					continue
				}
				rep.Principals = true
				rep.Events++
				ne.PrincipalType, ne.PrincipalName = p.GetType(), p.GetName()
				if t := p.GetType(); t == principalWorker || t == principalServer {
					continue
				}
				ne.What = fmt.Sprintf("%s of %s %s (run %s)", words(ne.EventType), ne.WorkflowType, ne.WorkflowID, ne.RunID)
				ne.Problem = fmt.Sprintf("%s by %s, neither a worker nor the server: only workers write namespace %s", ne.What, principalWords(p), ns)
				rep.Unvouched = append(rep.Unvouched, ne)
			}
		}
		token = page.GetNextPageToken()
		if len(token) == 0 || rep.Truncated {
			break
		}
	}
	switch {
	case rep.Principals:
		rep.Unvouched = append(rep.Unvouched, gaps...)
	case rep.Executions > 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("the server recorded no principals in namespace %s, so who wrote it cannot be checked: serve with an authorizer "+
			"that tells workers from persons and frontend.enablePrincipalPropagation on (docs/threat-model.md)", ns))
	}
	if rep.Truncated {
		rep.Notes = append(rep.Notes, fmt.Sprintf("namespace %s holds more than %d executions: only the first %d were read", ns, limit, limit))
	}
	rep.Notes = append(rep.Notes, "an execution deleted from the namespace leaves nothing to audit: only workers may delete there (toolgate dev's authorizer)")
	return rep, nil
}

// historyOf reads run's whole history from namespace ns.
func historyOf(ctx context.Context, c client.Client, ns string, run *commonpb.WorkflowExecution) ([]*historypb.HistoryEvent, error) {
	var evs []*historypb.HistoryEvent
	var token []byte
	for {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := c.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: ns, Execution: run, NextPageToken: token})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading the history of %s (run %s) of namespace %s: %w", run.GetWorkflowId(), run.GetRunId(), ns, err)
		}
		evs = append(evs, resp.GetHistory().GetEvents()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return evs, nil
		}
	}
}

// RunAudit is one run's execution read from the server, and its audit.
type RunAudit struct {
	WorkflowID string
	RunID      string
	Report     Report
	Err        error // the history could not be read or audited
}

// Runs audits every execution of AgentRun in namespace ns, read over c's
// connection — of the workflow ids ids only, when given — at most limit
// (0: MaxNamespaceExecutions); truncated when there were more.
func Runs(ctx context.Context, c client.Client, ns string, ids []string, limit int, pol *policy.Policy, opts ...Option) (out []RunAudit, truncated bool, err error) {
	if limit <= 0 {
		limit = MaxNamespaceExecutions
	}
	var token []byte
	for {
		page, err := c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: ns, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return out, false, fmt.Errorf("listing the runs of namespace %s: %w", ns, err)
		}
		for _, ex := range page.GetExecutions() {
			run := ex.GetExecution()
			if ex.GetType().GetName() != workflows.WorkflowName || (len(ids) > 0 && !slices.Contains(ids, run.GetWorkflowId())) {
				continue
			}
			if len(out) >= limit {
				return out, true, nil
			}
			ra := RunAudit{WorkflowID: run.GetWorkflowId(), RunID: run.GetRunId()}
			evs, err := historyOf(ctx, c, ns, run)
			if err == nil {
				ra.Report, err = Events(&historypb.History{Events: evs}, pol, opts...)
			}
			ra.Err = err
			out = append(out, ra)
		}
		if token = page.GetNextPageToken(); len(token) == 0 {
			return out, false, nil
		}
	}
}
