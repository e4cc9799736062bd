package devserver

import (
	"testing"

	"go.temporal.io/server/common/dynamicconfig"
)

// The queue readers' poll rate is what bounded a sequential run to 20 calls a
// second (BENCHMARKS.md, "Where a call's time went"): toolgate's server must
// raise it for every queue a call goes through, and a caller's override (the
// benchmark's stock baseline) must win.
func TestQueuePollRate(t *testing.T) {
	keys := map[string]dynamicconfig.Key{
		"transfer":   dynamicconfig.TransferProcessorMaxPollRPS.Key(),
		"timer":      dynamicconfig.TimerProcessorMaxPollRPS.Key(),
		"visibility": dynamicconfig.VisibilityProcessorMaxPollRPS.Key(),
	}
	dc := dynamicConfig(nil)
	for name, k := range keys {
		if got := dc[k]; got != QueuePollRPS {
			t.Errorf("%s queue (%s): poll rate %v, want %d", name, k, got, QueuePollRPS)
		}
	}
	if QueuePollRPS <= StockQueuePollRPS {
		t.Errorf("QueuePollRPS = %d: no higher than the stock server's %d", QueuePollRPS, StockQueuePollRPS)
	}

	// The stock rate is the server's own default of each setting.
	defaults := dynamicconfig.NewNoopCollection()
	for name, s := range map[string]dynamicconfig.GlobalIntSetting{"transfer": dynamicconfig.TransferProcessorMaxPollRPS,
		"timer": dynamicconfig.TimerProcessorMaxPollRPS, "visibility": dynamicconfig.VisibilityProcessorMaxPollRPS} {
		if d := s.Get(defaults)(); d != StockQueuePollRPS {
			t.Errorf("the server's default %s queue poll rate is %d, StockQueuePollRPS says %d", name, d, StockQueuePollRPS)
		}
	}
	stock := dynamicConfig(StockQueuePolling())
	for name, k := range keys {
		if got := stock[k]; got != StockQueuePollRPS {
			t.Errorf("StockQueuePolling: %s queue (%s): poll rate %v, want the stock 20", name, k, got)
		}
	}
	// Keys are case-insensitive, as in a dynamic config file; other settings stay.
	over := dynamicConfig(map[string]any{"History.TransferProcessorMaxPollRPS": 5})
	if got := over[keys["transfer"]]; got != 5 {
		t.Errorf("override of the transfer poll rate: got %v, want 5", got)
	}
	if got := over[dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key()]; got != true {
		t.Errorf("an override dropped another setting: update API = %v", got)
	}
}
