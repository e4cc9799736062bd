package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/worker"
)

// serving holds the flags dev and worker share.
type serving struct {
	allowAuto   *bool
	metricsAddr *string
	policyFile  *string
	mcpFile     *string
	deskDB      *string
}

func servingFlags(fs *flag.FlagSet) serving {
	return serving{
		allowAuto:   fs.Bool("allow-auto-approve", false, "let clients start runs with approval always_approve"),
		metricsAddr: fs.String("metrics-address", "", "serve the worker's Prometheus metrics at http://HOST:PORT/metrics (empty: none)"),
		policyFile:  fs.String("policy", "", "the approval policy (YAML or JSON): who may decide, with their public keys, and by which rules; with one, decisions must be signed"),
		mcpFile:     mcpFlag(fs),
		deskDB:      fs.String("desk-db", "", "the demo desk's database: empty for desk.db under --data (SQLite), or postgres://USER[:PASSWORD]@HOST:PORT/DB?sslmode=disable, which every worker on it shares"),
	}
}

// workerOptions are the worker's switches that dev, worker and demo set from flags.
type workerOptions struct {
	allowAuto bool
	policy    *policy.Policy
	mcpFile   string // an --mcp file: its servers' tools join the worker's
	deskDB    string // "" for the SQLite file under the data directory
}

func (sv serving) workerOptions() (workerOptions, error) {
	wo := workerOptions{allowAuto: *sv.allowAuto, mcpFile: *sv.mcpFile, deskDB: *sv.deskDB}
	if *sv.policyFile != "" {
		p, err := policy.Load(*sv.policyFile)
		if err != nil {
			return wo, err
		}
		wo.policy = p
	}
	return wo, nil
}

// parseServing parses args and starts the metrics endpoint if one was asked
// for (nil otherwise); stop it with stopMetrics.
func (c *cli) parseServing(fs *flag.FlagSet, args []string, sv serving) (*worker.Prometheus, error) {
	if _, err := parse(fs, args); err != nil {
		return nil, err
	}
	return c.startMetrics(*sv.metricsAddr)
}

// startMetrics serves Prometheus metrics at addr and says where; "" serves
// none (nil, whose Handler is nil and whose Stop does nothing).
func (c *cli) startMetrics(addr string) (*worker.Prometheus, error) {
	if addr == "" {
		return nil, nil
	}
	m, err := worker.Metrics(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.stdout, "metrics at %s\n", m.URL())
	return m, nil
}

func stopMetrics(m *worker.Prometheus) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.Stop(ctx)
}
