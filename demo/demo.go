// Package demo composes toolgate's own demo worker: the support desk of
// activities/desk (a SQLite file, or a PostgreSQL database) and the support and OpenAI planners. It is
// what `toolgate demo`, `toolgate dev` and `toolgate worker` run; a program of
// your own passes its own tools and planners to worker.Start instead.
package demo

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/toolgate/toolgate/activities/desk"
	openaiplanner "github.com/toolgate/toolgate/activities/openai"
	"github.com/toolgate/toolgate/activities/support"
	"github.com/toolgate/toolgate/internal/private"
	"github.com/toolgate/toolgate/permit"
	"github.com/toolgate/toolgate/plan"
	"github.com/toolgate/toolgate/worker"
)

// DeskFile is the demo desk's database file name under a data directory:
// the desk `toolgate dev` and `toolgate worker` serve, which keeps every
// change its runs make.
const DeskFile = "desk.db"

// DemoDeskFile is the file name, under a data directory, of the desk
// `toolgate demo` serves: a desk of the demo's own, apart from DeskFile, and
// reset to its seed at the start of every demo (ResetDesk), so each demo finds
// TKT-3 open and no refunds paid, and never changes the desk of a
// `toolgate dev` on the same data directory.
const DemoDeskFile = "demo-desk.db"

// ResetDesk resets the demo's own desk under dataDir (DemoDeskFile, made if
// missing, as is dataDir) to its seed (desk.Desk.Reset) and returns its path,
// for OptionsWithDesk. It is for `toolgate demo`, before its worker starts.
func ResetDesk(ctx context.Context, dataDir string) (string, error) {
	if err := private.Dir(dataDir); err != nil {
		return "", fmt.Errorf("creating data directory: %w", err)
	}
	path := filepath.Join(dataDir, DemoDeskFile)
	d, err := desk.Open(path)
	if err != nil {
		return "", err
	}
	if err := d.Reset(ctx); err != nil {
		_ = d.Close()
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if err := d.Close(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return path, nil
}

// Options returns the options of toolgate's demo worker: the demo support
// desk (its SQLite file under dataDir) and the support and OpenAI planners.
// Close the returned desk when the worker stops.
func Options(dataDir string) (worker.Options, *desk.Desk, error) {
	return OptionsWithDesk(dataDir, "")
}

// OptionsWithDesk is Options with the desk in deskDB: a PostgreSQL URL
// (postgres://…, shared by every worker on it) or an SQLite file; "" means
// the SQLite file under dataDir.
func OptionsWithDesk(dataDir, deskDB string) (worker.Options, *desk.Desk, error) {
	if err := private.Dir(dataDir); err != nil {
		return worker.Options{}, nil, fmt.Errorf("creating data directory: %w", err)
	}
	if deskDB == "" {
		deskDB = filepath.Join(dataDir, DeskFile)
	}
	// The worker key signs the permits the desk's tools check: every
	// worker on this data directory signs and checks with it.
	key, err := permit.LoadOrCreateKey(filepath.Join(dataDir, permit.WorkerKeyFile))
	if err != nil {
		return worker.Options{}, nil, err
	}
	d, err := desk.Connect(deskDB)
	if err != nil {
		return worker.Options{}, nil, err
	}
	return worker.Options{
		WorkerKey: key,
		Tools:     d.Tools(),
		Planners: map[string]worker.PlanFunc{
			plan.KindSupport: support.Plan,
			plan.KindOpenAI:  openaiplanner.New(openaiplanner.OptionsFromEnv()).Plan,
		},
	}, d, nil
}
