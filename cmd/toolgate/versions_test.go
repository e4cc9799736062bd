package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	tgclient "github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/workflows"
)

// versions prints a line per rules version: the open runs, and whether this
// build runs it, naming the runs of a version it does not.
func TestPrintVersions(t *testing.T) {
	rep := tgclient.VersionsReport{TaskQueue: "toolgate", Build: workflows.Versions(), Open: 5, Newer: 1, Versions: []tgclient.VersionCount{
		{Version: 17, Open: 2, Runs: true}, {Version: 16, Runs: true}, {Version: 15, Runs: true},
		{Version: 9, Open: 2, IDs: []string{"ticket-9"}},
	}}
	var out bytes.Buffer
	printVersions(&out, rep)
	assert.Equal(t, `task queue toolgate: 5 open runs; this build runs rules versions 15 to 17
VERSION  OPEN   THIS BUILD
17       2      runs it (current: new runs take it)
16       0      runs it
15       0      runs it
9        2      does not run it: ticket-9, … (2 in all)
>17      1      does not run it: a newer build started them
`, out.String())
	assert.Equal(t, int64(3), rep.Retired())
}
