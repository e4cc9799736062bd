package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/toolgate/toolgate/workflows"
)

// A run of a retired rules version is refused before it does anything: its
// workflow task fails with a message that names the run's version, the
// versions this build runs and a build that runs it, and no tool runs. The
// oldest live version still runs.
func TestARetiredVersionIsRefusedPlainly(t *testing.T) {
	v := workflows.Versions()
	require.Equal(t, workflows.CurrentRulesVersion, v.Current)
	require.LessOrEqual(t, v.Current-v.Oldest+1, 3, "at most three rules versions live in the code (issue #47)")

	for _, old := range []workflow.Version{workflow.DefaultVersion, 9, workflow.Version(v.Oldest - 1)} {
		f := newFixture(t)
		f.env.OnGetVersion("decision-kind", workflow.DefaultVersion, workflows.CurrentRulesVersion).Return(old)
		f.env.ExecuteWorkflow(workflows.WorkflowName, scripted(steps(call("search_tickets", `{"query":"login"}`))))
		err := f.env.GetWorkflowError()
		require.Error(t, err, "version %d", old)
		require.ErrorContains(t, err, workflows.RetiredMessage("default-test-workflow-id", int(old)))
		require.ErrorContains(t, err, "which this worker no longer runs")
		require.Empty(t, f.desk.runs, "a retired run ran a tool")
	}

	f := newFixture(t)
	f.env.OnGetVersion("decision-kind", workflow.DefaultVersion, workflows.CurrentRulesVersion).Return(workflow.Version(v.Oldest))
	res := f.run(scripted(steps(call("search_tickets", `{"query":"login"}`))))
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.NotEmpty(t, f.desk.runs, "the oldest live version ran no tool")
}

func TestRetiredMessageSaysWhatToDo(t *testing.T) {
	msg := workflows.RetiredMessage("ticket-9", -1)
	for _, want := range []string{"run ticket-9", "rules version -1 (the first release)", "this build runs rules versions 15 to 17",
		"toolgate at commit c073de4f16c0", "toolgate versions", "docs/versions.md"} {
		require.Contains(t, msg, want)
	}
}

func TestRetiredInFindsTheMessageInAPanic(t *testing.T) {
	msg := workflows.RetiredMessage("ticket-9", 9)
	got, ok := workflows.RetiredIn("workflow panic: " + msg + "\ngoroutine 1 [running]:\nmain.go:12")
	require.True(t, ok)
	require.Equal(t, msg, got)
	_, ok = workflows.RetiredIn("[TMPRL1100] nondeterministic workflow")
	require.False(t, ok)
}
