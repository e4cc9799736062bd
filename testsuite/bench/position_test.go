package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// synth builds a history event by event; times are milliseconds from t0.
type synth struct {
	t0 time.Time
	h  historypb.History
}

func (s *synth) add(ms int, t enumspb.EventType, set func(ev *historypb.HistoryEvent)) int64 {
	ev := &historypb.HistoryEvent{EventId: int64(len(s.h.Events) + 1), EventType: t,
		EventTime: timestamppb.New(s.t0.Add(time.Duration(ms) * time.Millisecond))}
	if set != nil {
		set(ev)
	}
	s.h.Events = append(s.h.Events, ev)
	return ev.EventId
}

// task adds a workflow task: scheduled, started, completed (or failed).
func (s *synth) task(sched, start, done int, failed bool) {
	sid := s.add(sched, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil)
	s.startTask(sid, start, done, failed)
}

func (s *synth) startTask(sid int64, start, done int, failed bool) {
	st := s.add(start, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{ScheduledEventId: sid}}
	})
	if failed {
		s.add(done, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, func(ev *historypb.HistoryEvent) {
			ev.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{ScheduledEventId: sid, StartedEventId: st}}
		})
		return
	}
	s.add(done, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: sid, StartedEventId: st}}
	})
}

func (s *synth) schedule(ms int, id string) int64 {
	return s.add(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityId: id, ActivityType: &commonpb.ActivityType{Name: Echo}}}
	})
}

// finish adds the activity's started (attempt) and completed events.
func (s *synth) finish(sched int64, start, done int, attempt int32) {
	st := s.add(start, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: sched, Attempt: attempt}}
	})
	s.add(done, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: sched, StartedEventId: st}}
	})
}

const ms = time.Millisecond

// Three calls in one run: a plain one; one whose handling task failed once
// (its time falls in TaskWait) and whose activity took two attempts; one
// whose workflow task was already scheduled (by a signal) before the result
// came. Then the run continues as new, and the next run makes one call.
func TestPositionsSynthetic(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := &synth{t0: t0}
	s.add(0, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	s.task(0, 1, 3, false)
	a1 := s.schedule(3, "c-1")
	s.finish(a1, 5, 9, 1)    // wait 2, run 4
	s.task(9, 12, 14, false) // handoff 0, task wait 3, task run 2 → total 11
	a2 := s.schedule(14, "c-2")
	s.finish(a2, 15, 20, 2)   // wait 1, run 5
	s.task(20, 21, 22, true)  // fails: not the handling task
	s.task(23, 30, 31, false) // handoff 0, task wait 20→30 = 10, task run 1 → total 17
	a3 := s.schedule(31, "c-3")
	s.add(33, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil)
	wft := s.add(33, enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil)
	s.finish(a3, 32, 36, 1)         // wait 1, run 4
	s.startTask(wft, 40, 41, false) // scheduled before the close: waits from the close (36) → 4, run 1 → total 10
	s.add(41, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, nil)
	run1 := &s.h

	s2 := &synth{t0: t0}
	s2.add(50, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil)
	s2.task(50, 52, 55, false)
	b1 := s2.schedule(55, "c-4") // boundary: 41 → 55 = 14
	s2.finish(b1, 56, 57, 1)
	s2.task(57, 60, 61, false) // total 6
	s2.schedule(61, "c-5")     // never closes: not counted
	run2 := &s2.h

	calls := Positions(run1)
	require.Len(t, calls, 3)
	want := []struct {
		id                                     string
		attempt                                int32
		wait, run, handoff, twait, trun, total time.Duration
	}{
		{"c-1", 1, 2 * ms, 4 * ms, 0, 3 * ms, 2 * ms, 11 * ms},
		{"c-2", 2, 1 * ms, 5 * ms, 0, 10 * ms, 1 * ms, 17 * ms},
		{"c-3", 1, 1 * ms, 4 * ms, 0, 4 * ms, 1 * ms, 10 * ms},
	}
	for i, w := range want {
		c := calls[i]
		require.Equal(t, w.id, c.ActivityID)
		require.Equal(t, i+1, c.Position)
		require.Equal(t, Echo, c.ActivityType)
		require.Equal(t, w.attempt, c.Attempt)
		require.Equal(t, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, c.Closed)
		require.Equal(t, []time.Duration{w.wait, w.run, w.handoff, w.twait, w.trun}, c.Parts(), w.id)
		require.Equal(t, w.total, c.Total, w.id)
	}
	// In a sequential run a call's total is the gap to the next call's schedule.
	require.Equal(t, calls[1].Scheduled.Sub(calls[0].Scheduled), calls[0].Total)
	require.Equal(t, calls[2].Scheduled.Sub(calls[1].Scheduled), calls[1].Total)

	chain, boundaries := ChainPositions([]*historypb.History{run1, run2})
	require.Len(t, chain, 4)
	require.Equal(t, []time.Duration{14 * ms}, boundaries)
	require.Equal(t, 1, chain[3].Run)
	require.Equal(t, 4, chain[3].Position)
	require.Equal(t, "c-4", chain[3].ActivityID)
	require.Equal(t, 6*ms, chain[3].Total)

	sum := Summarize(chain)
	require.Equal(t, 2, sum.First.Calls())
	require.Equal(t, Window{From: 3, To: 4}, Window{From: sum.Last.From, To: sum.Last.To})
	require.Equal(t, 11*ms, sum.First.P50Total) // nearest rank of {11, 17}
	require.Equal(t, 17*ms, sum.First.P99Total)
	require.Equal(t, 6*ms, sum.Last.P50Total) // {10, 6}
	require.InDelta(t, 6.0/11, sum.Growth, 1e-9)
	require.Equal(t, []time.Duration{2 * ms, 5 * ms, 0, 10 * ms, 2 * ms}, sum.First.P99)
	require.Equal(t, 4, sum.All.Calls())
	require.Equal(t, 4, sum.Head.Calls(), "the first 10, or fewer")
}

func TestPercentile(t *testing.T) {
	xs := make([]int, 200)
	for i := range xs {
		xs[i] = 200 - i // 1..200, reversed
	}
	require.Equal(t, 100, Percentile(xs, 50))
	require.Equal(t, 198, Percentile(xs, 99))
	require.Equal(t, 200, Percentile(xs, 100))
	require.Equal(t, 1, Percentile(xs, 0))
	require.Equal(t, 7, Percentile([]int{7}, 99))
	require.Equal(t, 0, Percentile([]int(nil), 50))
	fifty := xs[:50]
	require.Equal(t, 200, Percentile(fifty, 99), "the p99 of 50 values is their largest")
}
