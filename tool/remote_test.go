package tool_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tool"
)

func TestRemoteSpecValidation(t *testing.T) {
	ok := tool.Spec{Name: "refund_ts", TaskQueue: "toolgate-ts-tools", Activity: "refund", Destructive: true}
	require.NoError(t, ok.Validate())
	require.Equal(t, "refund", ok.ActivityType())
	require.Equal(t, "get", tool.Spec{Name: "get"}.ActivityType())
	for _, c := range []struct {
		spec tool.Spec
		want string
	}{
		{tool.Spec{Name: "a", Activity: "b"}, "task_queue is empty"},
		{tool.Spec{Name: "a", TaskQueue: "q", Local: true}, "cannot be local"},
		{tool.Spec{Name: "a", TaskQueue: "q q"}, `task_queue "q q"`},
		{tool.Spec{Name: "a", TaskQueue: "q", Activity: "-x"}, `activity "-x"`},
		{tool.Spec{Name: "a", TaskQueue: strings.Repeat("q", tool.MaxTaskQueueBytes+1)}, "at most 200 bytes"},
	} {
		require.ErrorContains(t, c.spec.Validate(), c.want)
	}
}
