package audit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/authority"
	"github.com/toolgate/toolgate/workflows"
)

// v16Reset is the reset rewound_v16.json holds: its id (its reason's end),
// the base run, its event and the run it made.
func v16Reset(t *testing.T) workflows.RewindRecord {
	t.Helper()
	f, err := os.Open(filepath.Join(histories, "rewound_v16.json"))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			reason := a.GetFailure().GetMessage()
			i := strings.LastIndex(reason, "reset ")
			require.GreaterOrEqual(t, i, 0, reason)
			return workflows.RewindRecord{WorkflowID: "fixture-rewound", BaseRunID: a.GetBaseRunId(), Event: ev.GetEventId(), NewRunID: a.GetNewRunId(),
				CallID: "c-2", By: "dave", Signed: true, Reset: reason[i+len("reset "):]}
		}
	}
	t.Fatal("no reset in rewound_v16.json")
	return workflows.RewindRecord{}
}

// A rewound run of rules version 16, audited with the records of the
// authority namespace: dave's rewind verifies with the worker's record of
// its reset; without the record, or with one of another reset, the audit
// names the reset — no worker's record covers it — and fails it, though
// dave's note is there and verifies.
func TestAResetIsCheckedAgainstItsRecord(t *testing.T) {
	want := v16Reset(t)
	read := func(rec *workflows.RewindRecord) audit.RecordReader {
		return func(reset string) (workflows.RewindRecord, error) {
			if rec == nil || reset != want.Reset {
				return workflows.RewindRecord{}, fmt.Errorf("%w: %s", authority.ErrNoRecord, reset)
			}
			return *rec, nil
		}
	}
	audited := func(rec *workflows.RewindRecord) audit.Report {
		t.Helper()
		rep, err := audit.File(filepath.Join(histories, "rewound_v16.json"), nil, audit.WithRewindRecords(read(rec)))
		require.NoError(t, err)
		assert.Equal(t, 16, rep.Version)
		return rep
	}

	rep := audited(&want)
	requireAllVerified(t, rep)
	assert.Empty(t, rep.Failed())

	other := want
	other.NewRunID = "another-run"
	for name, rec := range map[string]*workflows.RewindRecord{"none": nil, "another reset's": &other} {
		rep := audited(rec)
		var resets []string
		for _, e := range rep.Failed() {
			if e.Kind == audit.KindReset {
				resets = append(resets, e.Problem)
			}
		}
		require.Len(t, resets, 1, "%s: %+v", name, rep.Failed())
		assert.Contains(t, resets[0], "no worker's record covers it", name)
	}
	// Without the records (an exported file alone) the note vouches, as the
	// run took it only with its record.
	rep, err := audit.File(filepath.Join(histories, "rewound_v16.json"), nil)
	require.NoError(t, err)
	requireAllVerified(t, rep)
}
