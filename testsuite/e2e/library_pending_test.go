package e2e

import (
	"testing"

	"github.com/toolgate/toolgate/worker"
	"github.com/toolgate/toolgate/workflows"
)

// A worker made as docs/library.md shows (worker.Start, its options leaving
// SearchAttributes off) on a namespace that has toolgate's search
// attributes keeps none of them current; its waiting run is in `toolgate
// pending` all the same (issue #46: it was in neither pending nor the
// inbox, which look waiting runs up by ToolgateStatus).
func TestALibraryWorkersWaitingRunIsPending(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorkerWith(func(o *worker.Options) { o.SearchAttributes, o.Authority = false, nil })
	const id = "library-run"
	s.start(id, workflows.RunInput{Goal: "close the ticket", Planner: scripted("closed",
		step(call("close_ticket", `{"ticket_id":"TKT-3","resolution":"done"}`)))})
	s.awaitNext(id, waitTimeout, "gate:close_ticket")
	awaitPending(t, s.address(), id, "c-1", "close_ticket")
}
