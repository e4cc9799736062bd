package mcpserve

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/workflows"
)

// A call a human answered in the tool's place is its result, not an error,
// and its metadata says so and whose answer it is; one they cancelled or
// rejected is an error saying what happened.
func TestDoneSaysWhatAHumanDecided(t *testing.T) {
	responded := done("mcp-a-b", workflows.CallStatus{ExternalCall: workflows.ExternalCall{CallID: "c-2", Tool: "search_tickets", Done: true,
		Status: workflows.TraceResponded, Result: json.RawMessage(`{"tickets":[]}`), Note: "not executed: alice answered in the tool's place"}}, "")
	if responded.IsError || responded.Meta[MetaStatus] != workflows.TraceResponded || responded.Meta[MetaNote] != "not executed: alice answered in the tool's place" {
		t.Fatalf("responded: %+v", responded)
	}
	if txt := responded.Content[0].(*mcp.TextContent).Text; txt != `{"tickets":[]}` {
		t.Fatalf("responded content %q", txt)
	}
	cancelled := done("mcp-a-b", workflows.CallStatus{ExternalCall: workflows.ExternalCall{CallID: "c-3", Tool: "close_ticket", Done: true,
		Status: workflows.TraceCancelled, Error: "not executed: cancelled by alice: the user left"}}, "")
	if !cancelled.IsError || cancelled.Content[0].(*mcp.TextContent).Text != "not executed: cancelled by alice: the user left" {
		t.Fatalf("cancelled: %+v", cancelled)
	}
}
