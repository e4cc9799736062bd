package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/testsuite/testenv"
	"github.com/toolgate/toolgate/workflows"
)

// oldBuild stands for a toolgate build that still runs rules version 9: its
// AgentRun records that version, as such a build did, and ends when told.
func oldBuild(ctx workflow.Context, _ json.RawMessage) (workflows.RunResult, error) {
	workflow.GetVersion(ctx, "decision-kind", workflow.DefaultVersion, 9)
	workflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	return workflows.RunResult{Status: workflows.StatusCompleted, Answer: "finished by the old build"}, nil
}

func startOldBuild(t *testing.T, s *stack) sdkworker.Worker {
	t.Helper()
	w := sdkworker.New(s.client, workflows.TaskQueue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(oldBuild, workflow.RegisterOptions{Name: workflows.WorkflowName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}

// A run of a retired rules version, on any Temporal: `toolgate versions`
// counts it and names it; a worker of this build does not run it — its
// workflow task fails saying which version, which versions this build runs
// and which build runs it, and a query answers the same — and leaves it
// open, so a worker of the build it names carries it on to its end.
func TestARunOfARetiredVersionIsDrainedNotBroken(t *testing.T) {
	longSuite(t)
	s := newStack(t)
	old := startOldBuild(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const oldID, newID = "ticket-9", "ticket-16"
	if _, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: oldID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, json.RawMessage(`{"goal":"an old run"}`)); err != nil {
		t.Fatal(err)
	}
	awaitVisible(t, s, "TemporalChangeVersion = 'decision-kind-9'", 1)
	old.Stop()

	current := s.startWorker(false)
	s.start(newID, workflows.RunInput{Goal: "close the login ticket", Planner: scripted("closed", step(call("close_ticket", `{"ticket_id":"TKT-3"}`)))})
	s.awaitNext(newID, waitTimeout, "gate:close_ticket")

	v := workflows.Versions()
	testenv.Eventually(t, waitTimeout, "both runs counted by version", func() error {
		rep, err := s.tg.Versions(ctx)
		if err != nil {
			return err
		}
		byVersion := map[int]string{}
		for _, c := range rep.Versions {
			byVersion[c.Version] = fmt.Sprintf("%d %v %v", c.Open, c.Runs, c.IDs)
		}
		want := map[int]string{9: "1 false [ticket-9]", v.Current: "1 true []"}
		for ver, w := range want {
			if byVersion[ver] != w {
				return fmt.Errorf("version %d: %q, want %q (report %+v)", ver, byVersion[ver], w, rep)
			}
		}
		if rep.Open != 2 || rep.Retired() != 1 || rep.Newer != 0 {
			return fmt.Errorf("open %d, retired %d, newer %d; want 2, 1, 0", rep.Open, rep.Retired(), rep.Newer)
		}
		return nil
	})

	// Wake the old run: this build's worker takes its task and refuses it.
	if err := s.client.SignalWorkflow(ctx, oldID, "", "nudge", nil); err != nil {
		t.Fatal(err)
	}
	want := workflows.RetiredMessage(oldID, 9)
	testenv.Eventually(t, waitTimeout, "the workflow task's failure in the history", func() error {
		it := s.client.GetWorkflowHistory(ctx, oldID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var seen []string
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			seen = append(seen, ev.GetEventType().String())
			if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
				if strings.Contains(f.GetFailure().GetMessage(), want) {
					return nil
				}
				seen = append(seen, f.GetFailure().GetMessage())
			}
		}
		return fmt.Errorf("no WorkflowTaskFailed saying %q: %v", want, seen)
	})
	if _, err := s.tg.State(ctx, oldID); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the state query of the retired run: %v; want an error saying %q", err, want)
	}
	if d, err := s.client.DescribeWorkflowExecution(ctx, oldID, ""); err != nil || d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the retired run is not left running: %v %v", d.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	// The current run is unaffected: approve it, and it completes.
	s.decideWaiting(newID, "gate:close_ticket", "c-1", true)
	s.awaitStatus(newID, workflows.StatusCompleted, 0, waitTimeout)

	// The drain: the old build carries its run on to its end.
	current.stop()
	old = startOldBuild(t, s)
	defer old.Stop()
	if err := s.client.SignalWorkflow(ctx, oldID, "", "finish", nil); err != nil {
		t.Fatal(err)
	}
	var res workflows.RunResult
	if err := s.client.GetWorkflow(ctx, oldID, "").Get(ctx, &res); err != nil {
		t.Fatalf("the old build did not finish its run: %v", err)
	}
	if res.Answer != "finished by the old build" || res.Status != workflows.StatusCompleted {
		t.Fatalf("the old run ended %+v", res)
	}
}
