package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/toolgate/toolgate/tool"
	"github.com/toolgate/toolgate/workflows"
)

// A session of three user turns on a real history that is continued as new
// along the way: call ids go on without a gap, and the memo is carried over —
// each distinct query runs once, every repeat (in a later run too) is a
// cache_hit.
func TestSessionContinueAsNewOnARealHistory(t *testing.T) {
	t.Parallel()
	testSessionContinueAsNewOnARealHistory(t, newStack(t))
}

// testSessionContinueAsNewOnARealHistory is TestSessionContinueAsNewOnARealHistory on s (SQLite or PostgreSQL).
func testSessionContinueAsNewOnARealHistory(t *testing.T, s *stack) {
	s.startWorker(false)

	// 15 single-call steps over 3 queries, in 3 user turns (an empty step
	// ends a turn). Only a query's first call runs an activity.
	queries := [][]string{
		{"login", "invoice", "login", "invoice", "login"},
		{"shipping", "login", "shipping", "invoice", "shipping"},
		{"login", "invoice", "shipping", "login", "invoice"},
	}
	var steps [][]tool.Proposal
	var callQuery []string // query of c-1, c-2, …
	for _, turn := range queries {
		for _, q := range turn {
			steps = append(steps, step(call("search_tickets", fmt.Sprintf(`{"query":%q}`, q))))
			callQuery = append(callQuery, q)
		}
		steps = append(steps, step())
	}
	const id = "session-can"
	first := s.start(id, workflows.RunInput{
		Goal:         "search the desk, three turns",
		Planner:      scripted("searched", steps...),
		Session:      true,
		HistoryLimit: sessionHistoryLimit,
	})

	t.Cleanup(func() {
		if t.Failed() { // where did the session's signals go?
			for i, r := range runChain(t, s, id, first.GetRunID()) {
				t.Logf("run %d: %s", i+1, r)
			}
		}
	})
	s.awaitStatus(id, workflows.StatusWaitingForInput, 1, waitTimeout)
	s.signal(id, workflows.SignalMessage, workflows.MessageInput{Text: "turn two"})
	s.awaitStatus(id, workflows.StatusWaitingForInput, 2, waitTimeout)
	s.signal(id, workflows.SignalMessage, workflows.MessageInput{Text: "turn three"})
	s.awaitStatus(id, workflows.StatusWaitingForInput, 3, waitTimeout)
	s.signal(id, workflows.SignalEnd, json.RawMessage(`{}`))

	res := s.result(id, waitTimeout)
	if res.Status != workflows.StatusCompleted || res.Answer != "searched" {
		t.Fatalf("result status %q answer %q error %q, want completed with the answer", res.Status, res.Answer, res.Error)
	}

	runs := runChain(t, s, id, first.GetRunID())
	for i, r := range runs {
		t.Logf("run %d: %s", i+1, r)
	}
	if len(runs) < 2 {
		t.Fatalf("the session ran in %d run(s), want at least one continue-as-new (history_limit %d)", len(runs), sessionHistoryLimit)
	}
	last := runs[len(runs)-1]
	if last.end != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED || last.runID == first.GetRunID() {
		t.Fatalf("last run %+v, want a later run that completed", last)
	}

	// One record per call, c-1 … c-15 in order: no gap, no repeat across runs.
	if len(res.Trace) != len(callQuery) {
		t.Fatalf("trace has %d records, want %d: %v", len(res.Trace), len(callQuery), events(res.Trace))
	}
	firstOK := map[string]int{} // query -> number of the call that ran it
	for i, r := range res.Trace {
		want := fmt.Sprintf("c-%d", i+1)
		var args struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(r.Args, &args); err != nil || r.CallID != want || args.Query != callQuery[i] {
			t.Fatalf("trace record %d: %s %s %s, want %s with query %q", i, r.CallID, r.Args, r.Status, want, callQuery[i])
		}
		_, seen := firstOK[args.Query]
		switch {
		case !seen && r.Status == workflows.TraceOK:
			firstOK[args.Query] = i + 1
		case seen && r.Status == workflows.TraceCacheHit:
		default:
			t.Fatalf("%s (query %q, seen before: %v) is %s; want ok the first time, cache_hit after: %v",
				r.CallID, args.Query, seen, r.Status, events(res.Trace))
		}
	}
	if len(firstOK) != 3 {
		t.Fatalf("queries run: %v, want 3", firstOK)
	}

	// The memo crossed a continue-as-new: some cache_hit was served by a later
	// run than the one whose call ran that query.
	crossed := false
	for n := range res.Trace {
		callNo := n + 1
		q := callQuery[n]
		if callNo != firstOK[q] && runOf(runs, callNo) > runOf(runs, firstOK[q]) {
			crossed = true
			t.Logf("c-%d (%s) in run %d is a cache_hit of c-%d in run %d", callNo, q, runOf(runs, callNo)+1, firstOK[q], runOf(runs, firstOK[q])+1)
			break
		}
	}
	if !crossed {
		t.Fatalf("no cache_hit was served by a later run than the call it repeats; runs: %+v", runs)
	}
}

// sessionHistoryLimit is the session test's history_limit. A memo hit adds no
// event, so the whole 3-turn session has few events (see the test's log):
// the limit is set low enough that the session continues as new.
const sessionHistoryLimit = 20

// runInfo is one run of a workflow id's continue-as-new chain.
type runInfo struct {
	runID        string
	events       int
	carriedCalls int // calls numbered before this run started
	carried      string
	signals      []string // signals this run received, in order
	end          enumspb.EventType
}

func (r runInfo) String() string {
	return fmt.Sprintf("%s: %d events, signals %v, carried in: %s, last event %s", r.runID, r.events, r.signals, r.carried, r.end)
}

// runChain follows the chain of runs from firstRunID through continue-as-new.
func runChain(t *testing.T, s *stack, id, firstRunID string) []runInfo {
	t.Helper()
	var runs []runInfo
	for runID := firstRunID; runID != ""; {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		it := s.client.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		r := runInfo{runID: runID}
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				cancel()
				t.Fatalf("history of %s run %s: %v", id, runID, err)
			}
			r.events++
			r.end = ev.GetEventType()
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				var in workflows.RunInput
				if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in); err != nil {
					cancel()
					t.Fatalf("input of %s run %s: %v", id, runID, err)
				}
				r.carried = "nothing"
				if c := in.Carry; c != nil {
					r.carriedCalls = c.Calls
					r.carried = fmt.Sprintf("%d calls, turn %d, %d memo entries, waiting for input %v, messages %q, end received %v",
						c.Calls, c.Turn, len(c.Memo), c.AwaitingInput, c.Messages, c.Ended)
				}
			}
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				r.signals = append(r.signals, a.GetSignalName())
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		cancel()
		runs = append(runs, r)
		runID = next
	}
	return runs
}

// runOf is the index of the run that numbered call c-<callNo>.
func runOf(runs []runInfo, callNo int) int {
	idx := 0
	for i, r := range runs {
		if callNo > r.carriedCalls {
			idx = i
		}
	}
	return idx
}
