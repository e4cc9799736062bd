package client

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/toolgate/toolgate/workflows"
)

// MaxRetiredListed is how many open runs of a retired rules version
// Versions names (it counts them all).
const MaxRetiredListed = 20

// VersionCount is the open runs of one rules version on the task queue.
type VersionCount struct {
	// Version is the rules version (workflows.Versions); -1 is the first
	// release's (a run with no version marker), and Newer counts runs of a
	// version above this build's.
	Version int   `json:"version"`
	Open    int64 `json:"open"`
	// Runs this build runs: Version from Oldest to Current.
	Runs bool `json:"runs"`
	// IDs names up to MaxRetiredListed open runs of a version this build
	// does not run.
	IDs []string `json:"ids,omitempty"`
}

// VersionsReport is what `toolgate versions` prints: the open AgentRun runs
// of the client's task queue per rules version, and what this build runs.
type VersionsReport struct {
	TaskQueue string                  `json:"task_queue"`
	Build     workflows.RulesVersions `json:"build"`
	Open      int64                   `json:"open"`
	Versions  []VersionCount          `json:"versions"`
	// Newer counts open runs of a rules version above this build's.
	Newer int64 `json:"newer,omitempty"`
}

// Retired is how many open runs this build does not run (a version below
// its oldest, or above its current).
func (r VersionsReport) Retired() int64 {
	n := r.Newer
	for _, v := range r.Versions {
		if !v.Runs {
			n += v.Open
		}
	}
	return n
}

// Versions counts the open runs of the client's task queue per rules
// version, on any Temporal: each run records its version with
// workflow.GetVersion, which Temporal keeps in the TemporalChangeVersion
// search attribute ("decision-kind-16"); a run of the first release has
// none. Versions of the runs of a retired version are listed by id, so an
// operator can drain them before deploying this build (docs/versions.md).
func (c *Client) Versions(ctx context.Context) (VersionsReport, error) {
	b := workflows.Versions()
	rep := VersionsReport{TaskQueue: c.taskQueue, Build: b}
	open, err := runsQuery([]string{c.taskQueue}, "")
	if err != nil {
		return rep, err
	}
	if rep.Open, err = c.count(ctx, open); err != nil {
		return rep, err
	}
	var counted int64
	add := func(v int, query string) error {
		n, err := c.count(ctx, query)
		if err != nil {
			return err
		}
		counted += n
		vc := VersionCount{Version: v, Open: n, Runs: v >= b.Oldest && v <= b.Current}
		if n > 0 && !vc.Runs {
			if vc.IDs, err = c.ids(ctx, query); err != nil {
				return err
			}
		}
		if n > 0 || vc.Runs {
			rep.Versions = append(rep.Versions, vc)
		}
		return nil
	}
	for v := b.Current; v >= 1; v-- {
		if err := add(v, fmt.Sprintf("%s AND TemporalChangeVersion = %s", open, quote(fmt.Sprintf("%s-%d", b.ChangeID, v)))); err != nil {
			return rep, err
		}
	}
	if err := add(-1, open+" AND TemporalChangeVersion IS NULL"); err != nil {
		return rep, err
	}
	rep.Newer = max(rep.Open-counted, 0)
	return rep, nil
}

func (c *Client) count(ctx context.Context, query string) (int64, error) {
	resp, err := c.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
	if err != nil {
		return 0, fmt.Errorf("counting runs (%s): %w", query, err)
	}
	return resp.GetCount(), nil
}

func (c *Client) ids(ctx context.Context, query string) ([]string, error) {
	resp, err := c.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: MaxRetiredListed})
	if err != nil {
		return nil, fmt.Errorf("listing runs (%s): %w", query, err)
	}
	var out []string
	for _, e := range resp.GetExecutions() {
		out = append(out, e.GetExecution().GetWorkflowId())
	}
	return out, nil
}
