package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// An activity's update id is the same for each of its attempts and differs
// for any other activity, run or update.
func TestActivityUpdateID(t *testing.T) {
	info := func(run, act string, attempt int32) activity.Info {
		return activity.Info{WorkflowExecution: workflow.Execution{ID: "w", RunID: run}, ActivityID: act, Attempt: attempt}
	}
	home := ID("")
	a := activityUpdateID(info("r1", "5", 1), home, UpdateReserve, "r-")
	assert.Equal(t, a, activityUpdateID(info("r1", "5", 7), home, UpdateReserve, "r-"))
	assert.Regexp(t, `^r-[0-9a-f]{64}$`, a)
	for _, other := range []string{
		activityUpdateID(info("r1", "6", 1), home, UpdateReserve, "r-"),
		activityUpdateID(info("r2", "5", 1), home, UpdateReserve, "r-"),
		activityUpdateID(info("r1", "5", 1), home, UpdateSettle, "r-"),
		activityUpdateID(info("r1", "5", 1), ShardID("", "spend"), UpdateReserve, "r-"),
	} {
		assert.NotEqual(t, a, other)
	}
}

// Guards says when the ledger was never started.
func TestGuardsNotStarted(t *testing.T) {
	c := &mocks.Client{}
	c.On("QueryWorkflow", mock.Anything, ID(queue), "", QueryGuards).Return(nil, serviceerror.NewNotFound("no such workflow"))
	_, err := Guards(context.Background(), c, queue)
	assert.ErrorIs(t, err, ErrNotStarted)
}

// Toggle sends the token as an UpdateWithStart whose id comes from the
// token, again while the ledger continues as new.
func TestToggle(t *testing.T) {
	c := &mocks.Client{}
	op := client.WithStartWorkflowOperation(nil)
	c.On("NewWithStartWorkflowOperation", mock.MatchedBy(func(o client.StartWorkflowOptions) bool {
		return o.ID == ID(queue) && o.TaskQueue == queue && o.WorkflowIDConflictPolicy == enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING &&
			o.WorkflowIDReusePolicy == enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}), WorkflowName, Input{}).Return(op)
	closing, done := &mocks.WorkflowUpdateHandle{}, &mocks.WorkflowUpdateHandle{}
	closing.On("Get", mock.Anything, mock.Anything).Return(closingError()).Once()
	done.On("Get", mock.Anything, mock.Anything).Run(func(a mock.Arguments) {
		*a.Get(1).(*View) = View{Entries: 3}
	}).Return(nil).Once()
	want := func(o client.UpdateWithStartWorkflowOptions) bool {
		u := o.UpdateOptions
		return u.UpdateID == "p-"+tokenID("tok") && u.UpdateName == UpdatePause && u.WaitForStage == client.WorkflowUpdateStageCompleted &&
			len(u.Args) == 1 && u.Args[0] == Switch{Token: "tok"}
	}
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.MatchedBy(want)).Return(closing, nil).Once()
	c.On("UpdateWithStartWorkflow", mock.Anything, mock.MatchedBy(want)).Return(done, nil).Once()
	start := time.Now()
	v, err := Toggle(context.Background(), c, queue, true, "tok")
	require.NoError(t, err)
	assert.Equal(t, 3, v.Entries)
	assert.Less(t, time.Since(start), 2*time.Second)
	c.AssertExpectations(t)
}

// A refusal is the ledger's answer, not to be retried; ClosingError is.
func TestErrorKinds(t *testing.T) {
	assert.True(t, isClosing(closingError()))
	assert.False(t, isRefusal(closingError()))
	assert.True(t, isRefusal(refused(errors.New("no"))))
	assert.False(t, isClosing(temporal.NewApplicationError("x", "Other")))
	assert.False(t, isRefusal(errors.New("network")))
}
