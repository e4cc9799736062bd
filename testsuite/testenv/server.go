package testenv

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/workflows"
)

// SearchAttributes are toolgate's search attributes, as `toolgate dev`
// registers them (cmd/toolgate/serve.go).
var SearchAttributes = map[string]enumspb.IndexedValueType{
	workflows.SearchAttrStatus:       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	workflows.SearchAttrPendingTools: enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	workflows.SearchAttrForkedFrom:   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// DefaultStartTimeout is ServerOptions.Timeout's default.
const DefaultStartTimeout = 2 * time.Minute

// ServerOptions configure StartServer.
type ServerOptions struct {
	// DataDir holds the server's SQLite file. "" means a new t.TempDir().
	DataDir string
	// Database, when set, is the PostgreSQL URL the server persists to
	// instead (devserver.Options.Database).
	Database string
	// Timeout bounds starting the server and dialing it. 0 means
	// DefaultStartTimeout.
	Timeout time.Duration
	// Client are the client's options (Logger, MetricsHandler, …); StartServer
	// sets HostPort and Namespace.
	Client client.Options
	// StrictStop makes a failure to stop the server when the test ends fail
	// the test (t.Errorf); otherwise it is only logged.
	StrictStop bool
	// Nexus serves Nexus operations (devserver.Options.Nexus).
	Nexus bool
}

// StartServer starts the embedded server (devserver, on a free local port)
// with toolgate's SearchAttributes, and dials a client of it. Both are
// stopped when the test ends (the client first). A failure to start or dial
// fails the test.
func StartServer(t testing.TB, o ServerOptions) (*devserver.Server, client.Client) {
	t.Helper()
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	began := time.Now()
	srv, err := devserver.Start(ctx, devserver.Options{DataDir: o.DataDir, Database: o.Database, SearchAttributes: SearchAttributes, Nexus: o.Nexus})
	if err != nil {
		t.Fatalf("starting the embedded server: %v", err)
	}
	t.Logf("server up at %s in %v", srv.Address(), time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			if o.StrictStop {
				t.Errorf("stopping the server: %v", err)
			} else {
				t.Logf("stopping the server: %v", err)
			}
		}
	})
	co := o.Client
	co.HostPort, co.Namespace = srv.Address(), srv.Namespace()
	c, err := client.DialContext(ctx, co)
	if err != nil {
		t.Fatalf("dialing %s: %v", srv.Address(), err)
	}
	t.Cleanup(c.Close)
	return srv, c
}
