// Package authority is where toolgate keeps what must outlive any client of
// the runs: the uses of signed tokens, links and permits (each claimed once),
// and the fleet ledger of every task queue with its budgets and pauses.
//
// They live in a namespace of their own, the authority namespace (default:
// the runs' namespace + Suffix), which only workers write: a person's
// credential, or any client of the runs' namespace, can read it at most. A
// client of the runs can then complete, delete, reset, terminate, start or
// signal what it likes there, and no use comes back, no claim is squatted,
// no budget or pause is wiped.
//
// Workers reach it with a second client (Conn), from local activities: a
// run's workflow code never names the namespace.
package authority

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Suffix makes the default authority namespace of a runs' namespace.
const Suffix = "-authority"

// Namespace is the default authority namespace of the runs' namespace
// runs: runs + Suffix.
func Namespace(runs string) string { return runs + Suffix }

// Conn is a worker's client of the authority namespace.
type Conn struct {
	// Client is dialled to Namespace (client.NewClientFromExisting over the
	// worker's connection, say), with a credential that may write it.
	Client client.Client
	// Namespace is the authority namespace's name.
	Namespace string
}

// ClaimQueue is the task queue a claim's marker workflow is started on: one
// no worker polls, so no worker spends a workflow task on a claim.
// ClaimTimeout is how long the marker stays open before the server times it
// out; its id stays taken after that, for the namespace's retention.
const (
	ClaimQueue   = "toolgate-claims"
	ClaimTimeout = 10 * time.Second
)

// MarkerWorkflow is the workflow type of a claim: toolgate's marker
// (workflows.StartMarkerWorkflow), which does nothing; its id is what counts.
const MarkerWorkflow = "toolgate.start-token"

// ErrUsed: the use was claimed already, by another claimant.
var ErrUsed = errors.New("used already")

// Claim records one use, the workflow id wid, for claimant: it starts the
// marker workflow wid in namespace ns with the id reuse policy
// REJECT_DUPLICATE and a request id derived from claimant. The server
// answers a start with the same request id with the run it started (the
// same claimant again: a retry, an attempt after a crash) and refuses any
// other with ErrUsed for as long as it keeps the closed marker (the
// namespace's retention, days; no token lives past an hour). So a claim
// knows its claimant: nobody else's start of the id matters to the owner,
// and a claimant cannot take what another holds.
func Claim(ctx context.Context, c client.Client, ns, wid, claimant string) error {
	return startMarker(ctx, c, ns, wid, claimant, nil)
}

// startMarker starts the marker workflow wid in namespace ns for claimant
// (Claim), with memo when it carries a record (Record).
func startMarker(ctx context.Context, c client.Client, ns, wid, claimant string, memo *commonpb.Memo) error {
	if c == nil {
		return errors.New("authority: no Temporal client to claim with")
	}
	_, err := c.WorkflowService().StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace:             ns,
		WorkflowId:            wid,
		WorkflowType:          &commonpb.WorkflowType{Name: MarkerWorkflow},
		TaskQueue:             &taskqueuepb.TaskQueue{Name: ClaimQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		WorkflowRunTimeout:    durationpb.New(ClaimTimeout),
		Identity:              "toolgate claim",
		RequestId:             RequestID(claimant),
		WorkflowIdReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		Memo:                  memo,
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		return fmt.Errorf("%w: workflow %s of namespace %s holds its use, for another claimant", ErrUsed, wid, ns)
	case err != nil:
		return fmt.Errorf("authority: claiming %s in namespace %s: %w", wid, ns, err)
	}
	return nil
}

// RequestID is the request id of claimant's claims: the first 16 bytes of
// the SHA-256 of its name, in hex.
func RequestID(claimant string) string {
	sum := sha256.Sum256([]byte(claimant))
	return hex.EncodeToString(sum[:16])
}

// Check makes sure the authority namespace ns exists on c's server, saying
// how to make it when it does not.
func Check(ctx context.Context, c client.Client, ns string) error {
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	var nf *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("the authority namespace %s does not exist: create it (temporal operator namespace create --namespace %s), "+
			"or name another with --authority-namespace; toolgate dev creates it", ns, ns)
	case err != nil:
		return fmt.Errorf("the authority namespace %s: %w", ns, err)
	}
	return nil
}
