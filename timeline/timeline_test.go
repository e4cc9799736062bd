package timeline

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

func ev(id int64, t enumspb.EventType, task int64) *historypb.HistoryEvent {
	e := &historypb.HistoryEvent{EventId: id, EventType: t}
	switch t {
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{
			UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{WorkflowTaskCompletedEventId: task}}
	case enumspb.EVENT_TYPE_TIMER_STARTED:
		e.Attributes = &historypb.HistoryEvent_TimerStartedEventAttributes{TimerStartedEventAttributes: &historypb.TimerStartedEventAttributes{WorkflowTaskCompletedEventId: task}}
	}
	return e
}

// A running run's history is cut after its last completed workflow task —
// that task's commands kept, since a replay matches them — and before what
// the workflow has not seen yet; a closed run's is kept whole.
func TestReplayableKeepsTheLastTasksCommands(t *testing.T) {
	events := []*historypb.HistoryEvent{
		ev(1, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 0),
		ev(2, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0),
		ev(3, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 0),
		ev(4, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 0),
		ev(5, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, 4),
		ev(6, enumspb.EVENT_TYPE_TIMER_STARTED, 4),
		ev(7, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, 0),
		ev(8, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0),
		ev(9, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, 0),
	}
	if got := replayable(events); len(got) != 6 {
		t.Fatalf("cut after event %d, want after 6 (the last task's commands kept)", got[len(got)-1].GetEventId())
	}
	closed := append(events[:6:6], ev(7, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, 4))
	if got := replayable(closed); len(got) != 7 {
		t.Fatalf("a closed history was cut to %d events", len(got))
	}
	if got := replayable(events[:3]); got != nil {
		t.Fatalf("no task completed: %d events kept, want none", len(got))
	}
}
