package client

import (
	"context"
	"errors"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
)

// The server's limit on a run's updates in flight is a proposal to make
// again (ErrBusy), not a failure; other exhaustion stays what it is.
func TestProposalRefusedForNowByTheServer(t *testing.T) {
	c := &Client{}
	busy := &serviceerror.ResourceExhausted{Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT,
		Message: "limit on number of concurrent in-flight updates has been reached (10)"}
	if err := c.classifyProposal(context.Background(), "mcp-a-r", busy); !errors.Is(err, ErrBusy) {
		t.Fatalf("in-flight limit: %v, want ErrBusy", err)
	}
	other := &serviceerror.ResourceExhausted{Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT, Message: "namespace rate limit exceeded"}
	if err := c.classifyProposal(context.Background(), "mcp-a-r", other); errors.Is(err, ErrBusy) || !errors.As(err, new(*serviceerror.ResourceExhausted)) {
		t.Fatalf("rate limit: %v, want the server's error as it is", err)
	}
}
