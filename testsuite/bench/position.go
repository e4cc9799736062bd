package bench

import (
	"cmp"
	"math"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Latency by position in a run, from the server's event times alone (no
// client clock): what each regular-activity call of a run cost, and where
// the time went.
//
// A call's latency (Total) runs from its ActivityTaskScheduled event to the
// WorkflowTaskCompleted of the workflow task that received its result. In a
// run of sequential calls that task is the one that schedules the next call:
// its WorkflowTaskCompleted and the next ActivityTaskScheduled are written in
// the same batch, so Total is the gap between consecutive
// ActivityTaskScheduled events, and it is defined for the last call too. It
// is cut into five consecutive parts that add up to it exactly:
//
//	ActivityWait  ActivityTaskScheduled → ActivityTaskStarted     (dispatch to the activity worker)
//	ActivityRun   ActivityTaskStarted → the activity's close event (the activity, and its result back)
//	Handoff       the close event → WorkflowTaskScheduled          (0 when written together, as usual)
//	TaskWait      WorkflowTaskScheduled (or the close, if later) → WorkflowTaskStarted (dispatch of the workflow task)
//	TaskRun       WorkflowTaskStarted → WorkflowTaskCompleted     (the workflow code, and the task's round trip)
//
// The task that received the result is the first workflow task started after
// the activity's close event whose completion is in the history; one that
// failed or timed out before it is retried, and its time falls in TaskWait,
// which runs from the WorkflowTaskScheduled of the first task started after
// the close. Local
// activities (MarkerRecorded events, inside a workflow task) have no such
// events and are not counted; nor is a call whose close, or whose handling
// task's completion, is missing (a run that ended first).

// CallTiming is one regular-activity call's latency and its parts.
type CallTiming struct {
	// Run is the index of the call's run in a continue-as-new chain (0 from
	// Positions); Position is the call's 1-based position in the run
	// (Positions) or in the whole chain (ChainPositions).
	Run, Position int
	ActivityID    string
	ActivityType  string
	Attempt       int32 // of the ActivityTaskStarted event (the last attempt)
	Closed        enumspb.EventType
	Scheduled     time.Time // the ActivityTaskScheduled event's time

	ActivityWait, ActivityRun, Handoff, TaskWait, TaskRun time.Duration
	// Total is the sum of the five parts: ActivityTaskScheduled to the
	// WorkflowTaskCompleted that handled the result.
	Total time.Duration
}

// Parts are the call's parts in order, named as in PartNames.
func (c CallTiming) Parts() []time.Duration {
	return []time.Duration{c.ActivityWait, c.ActivityRun, c.Handoff, c.TaskWait, c.TaskRun}
}

// PartNames name CallTiming.Parts.
var PartNames = []string{"activity schedule→start", "activity start→complete", "activity complete→WFT schedule", "WFT schedule→start", "WFT start→complete"}

// Positions reads every regular-activity call of one run's history, in the
// order the activities were scheduled.
func Positions(h *historypb.History) []CallTiming {
	started := map[int64]*historypb.HistoryEvent{} // by ScheduledEventId
	closed := map[int64]*historypb.HistoryEvent{}
	byID := map[int64]*historypb.HistoryEvent{}
	taskDone := map[int64]*historypb.HistoryEvent{} // WorkflowTaskCompleted by StartedEventId
	var taskStarts []*historypb.HistoryEvent
	for _, ev := range h.GetEvents() {
		byID[ev.GetEventId()] = ev
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = ev
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			closed[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] = ev
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			closed[ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()] = ev
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			closed[ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()] = ev
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			closed[ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()] = ev
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			taskStarts = append(taskStarts, ev)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			taskDone[ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()] = ev
		}
	}
	var out []CallTiming
	for _, ev := range h.GetEvents() {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || a == nil {
			continue
		}
		st, cl := started[ev.GetEventId()], closed[ev.GetEventId()]
		if st == nil || cl == nil {
			continue
		}
		// The first workflow task started after the close, and completed.
		i, _ := slices.BinarySearchFunc(taskStarts, cl.GetEventId(), func(e *historypb.HistoryEvent, id int64) int {
			return cmp.Compare(e.GetEventId(), id)
		})
		if i == len(taskStarts) {
			continue
		}
		// The first task started after the close was scheduled here (an
		// attempt that failed is retried by a later one).
		tScheduled := byID[taskStarts[i].GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]
		var tStarted, tDone *historypb.HistoryEvent
		for ; i < len(taskStarts); i++ {
			if done := taskDone[taskStarts[i].GetEventId()]; done != nil {
				tStarted, tDone = taskStarts[i], done
				break
			}
		}
		if tDone == nil || tScheduled == nil {
			continue
		}
		at := func(e *historypb.HistoryEvent) time.Time { return e.GetEventTime().AsTime() }
		c := CallTiming{Position: len(out) + 1, ActivityID: a.GetActivityId(), ActivityType: a.GetActivityType().GetName(),
			Attempt: st.GetActivityTaskStartedEventAttributes().GetAttempt(), Closed: cl.GetEventType(), Scheduled: at(ev)}
		c.ActivityWait = at(st).Sub(at(ev))
		c.ActivityRun = at(cl).Sub(at(st))
		waitFrom := at(tScheduled)
		if waitFrom.Before(at(cl)) {
			waitFrom = at(cl) // the task was scheduled before the result came (a signal, say): it waited from the result on
		}
		c.Handoff = waitFrom.Sub(at(cl))
		c.TaskWait = at(tStarted).Sub(waitFrom)
		c.TaskRun = at(tDone).Sub(at(tStarted))
		c.Total = c.ActivityWait + c.ActivityRun + c.Handoff + c.TaskWait + c.TaskRun
		out = append(out, c)
	}
	return out
}

// ChainPositions reads the calls of every run of a continue-as-new chain, in
// order, numbering positions across the chain. A boundary between two runs is
// not part of any call: the last call of a run ends with the workflow task
// that continued as new, and the next run's first call starts at its own
// ActivityTaskScheduled. What lies between — WorkflowExecutionContinuedAsNew
// of one run to the next run's first ActivityTaskScheduled (the new run's
// start and first workflow task) — is returned as Boundaries, one per run
// after the first that scheduled a call.
func ChainPositions(runs []*historypb.History) (calls []CallTiming, boundaries []time.Duration) {
	var canAt time.Time
	for r, h := range runs {
		cs := Positions(h)
		if !canAt.IsZero() && len(cs) > 0 {
			boundaries = append(boundaries, cs[0].Scheduled.Sub(canAt))
		}
		canAt = time.Time{}
		if evs := h.GetEvents(); len(evs) > 0 && evs[len(evs)-1].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			canAt = evs[len(evs)-1].GetEventTime().AsTime()
		}
		for _, c := range cs {
			c.Run, c.Position = r, len(calls)+1
			calls = append(calls, c)
		}
	}
	return calls, boundaries
}

// Percentile is the nearest-rank percentile of xs: the smallest value with
// at least p % of the values at or below it (so the p99 of 50 values is the
// largest). 0 for no values.
func Percentile[T ~int64 | ~float64 | ~int](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(float64(len(s))*p/100)) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// Window is the p50 and p99 of each part, and of the total, over some calls.
type Window struct {
	From, To int // positions, 1-based, inclusive
	// P50 and P99 are per part (in PartNames order); P50Total and P99Total of
	// the calls' totals (not the sum of the parts' percentiles).
	P50, P99           []time.Duration
	P50Total, P99Total time.Duration
}

// Calls is the number of calls in the window.
func (w Window) Calls() int { return w.To - w.From + 1 }

// WindowOf summarises calls[from-1 : to].
func WindowOf(calls []CallTiming, from, to int) Window {
	w := Window{From: from, To: to}
	sel := calls[from-1 : to]
	var totals []time.Duration
	for _, c := range sel {
		totals = append(totals, c.Total)
	}
	w.P50Total, w.P99Total = Percentile(totals, 50), Percentile(totals, 99)
	for k := range PartNames {
		var xs []time.Duration
		for _, c := range sel {
			xs = append(xs, c.Parts()[k])
		}
		w.P50, w.P99 = append(w.P50, Percentile(xs, 50)), append(w.P99, Percentile(xs, 99))
	}
	return w
}

// PositionSummary compares a run's first calls with its last ones.
type PositionSummary struct {
	First, Last, All Window
	// Head is the first 10 calls (or fewer): a change within the first 50
	// calls, which First would hide, shows there.
	Head Window
	// Growth is Last.P50Total / First.P50Total: 1 when a call's cost does
	// not depend on its position.
	Growth float64
}

// Summarize compares the first n calls with the last n (n = 50, or half the
// calls when there are fewer than 100, so the two never overlap).
func Summarize(calls []CallTiming) PositionSummary {
	var s PositionSummary
	if len(calls) == 0 {
		return s
	}
	n := min(50, len(calls)/2)
	if n == 0 {
		n = len(calls)
	}
	s.First, s.Last, s.All = WindowOf(calls, 1, n), WindowOf(calls, len(calls)-n+1, len(calls)), WindowOf(calls, 1, len(calls))
	s.Head = WindowOf(calls, 1, min(10, len(calls)))
	if s.First.P50Total > 0 {
		s.Growth = float64(s.Last.P50Total) / float64(s.First.P50Total)
	}
	return s
}
