package plan

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/tool"
)

func TestScriptedStepsThenAnswer(t *testing.T) {
	search := tool.Proposal{Tool: "search_tickets", Args: json.RawMessage(`{"query":"login"}`)}
	cfg := Config{Kind: KindScripted, Turns: [][]tool.Proposal{{search}, {}, {search, search}}, Answer: "done"}
	require.Equal(t, Decision{Calls: []tool.Proposal{search}}, Scripted(cfg, 0))
	require.Equal(t, Decision{Answer: "done"}, Scripted(cfg, 1), "an empty step ends the user turn")
	require.Len(t, Scripted(cfg, 2).Calls, 2, "calls proposed together")
	require.Equal(t, Decision{Answer: "done"}, Scripted(cfg, 3), "the steps ran out")
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{Kind: KindScripted}.Validate())
	require.NoError(t, Config{Kind: KindOpenAI}.Validate())
	require.ErrorContains(t, Config{}.Validate(), "planner.kind is empty")
	require.ErrorContains(t, Config{Kind: "oracle"}.Validate(), `planner.kind "oracle" is unknown`)
	require.ErrorContains(t, Config{Kind: KindScripted, Turns: [][]tool.Proposal{{{Tool: ""}}}}.Validate(), "planner.turns[0][0]: tool is empty")
}
