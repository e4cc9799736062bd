package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/internal/text"
)

// versions is `toolgate versions [--json]`: the open runs of the task queue
// per rules version, against the versions this build runs. It exits 3 when
// an open run is of a version this build does not run: drain those before
// deploying it (docs/versions.md).
func (c *cli) versions(ctx context.Context, args []string) error {
	fs := c.flags("versions")
	cn := c.connFlags(fs)
	tq := taskQueueFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	tc, conn, err := c.dial(ctx, cn)
	if err != nil {
		return err
	}
	defer tc.Close()
	rep, err := tgclient.New(tc, tgclient.WithConnection(conn), tgclient.WithTaskQueue(*tq)).Versions(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(c.stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		printVersions(c.stdout, rep)
	}
	if n := rep.Retired(); n > 0 {
		return &exitError{code: 3, err: fmt.Errorf("%s of a rules version this build does not run: drain them with %s before deploying this build (docs/versions.md)",
			text.Count(int(n), "open run"), rep.Build.RetiredBuild)}
	}
	return nil
}

// printVersions writes a line per rules version: its open runs, and whether
// this build runs it.
func printVersions(w io.Writer, rep tgclient.VersionsReport) {
	fmt.Fprintf(w, "task queue %s: %s; this build runs rules versions %d to %d\n",
		oneLine(rep.TaskQueue), text.Count(int(rep.Open), "open run"), rep.Build.Oldest, rep.Build.Current)
	fmt.Fprintf(w, "%-8s %-6s %s\n", "VERSION", "OPEN", "THIS BUILD")
	for _, v := range rep.Versions {
		says := "runs it"
		if v.Version == rep.Build.Current {
			says += " (current: new runs take it)"
		}
		if !v.Runs {
			says = "does not run it: " + oneLine(strings.Join(v.IDs, ", "))
			if int64(len(v.IDs)) < v.Open {
				says += fmt.Sprintf(", … (%d in all)", v.Open)
			}
		}
		name := fmt.Sprint(v.Version)
		if v.Version == -1 {
			name = "first"
		}
		fmt.Fprintf(w, "%-8s %-6d %s\n", name, v.Open, says)
	}
	if rep.Newer > 0 {
		fmt.Fprintf(w, "%-8s %-6d does not run it: a newer build started them\n", ">"+fmt.Sprint(rep.Build.Current), rep.Newer)
	}
}
