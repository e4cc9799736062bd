package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deciding is each deciding command's arguments but --as, against an
// address where nothing answers.
var deciding = map[string][]string{
	"approve": {"approve", "r-1", "c-1", "--address", "127.0.0.1:1"},
	"reject":  {"reject", "r-1", "c-1", "--reason", "no", "--address", "127.0.0.1:1"},
	"respond": {"respond", "r-1", "c-1", "--response", `{"ok":true}`, "--address", "127.0.0.1:1"},
}

// Without --as and without $USER, approve, reject and respond refuse before
// anything is sent: who decides is kept in the trace, never made up.
func TestDecidingNeedsAName(t *testing.T) {
	t.Setenv("USER", "")
	for name, args := range deciding {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		require.Error(t, err, name)
		assert.Equal(t, name+" needs --as NAME: who decides is kept in the trace", err.Error())
		assert.NotContains(t, stderr.String(), "deciding as", name)
	}
}

// Without --as, approve, reject and respond decide as $USER and say so on
// stderr; with --as, they say nothing of it.
func TestDecidingAsUserSaysSo(t *testing.T) {
	t.Setenv("USER", "alice")
	for name, args := range deciding {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		require.Error(t, err, "%s: nothing answers at the address", name)
		assert.Contains(t, err.Error(), "cannot connect to Temporal at 127.0.0.1:1", name)
		assert.Equal(t, "deciding as alice ($USER; pass --as NAME to record someone else)\n", stderr.String(), name)

		stdout.Reset()
		stderr.Reset()
		err = run(context.Background(), append(args, "--as", "bob"), strings.NewReader(""), &stdout, &stderr)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "cannot connect to Temporal at 127.0.0.1:1", name)
		assert.Empty(t, stderr.String(), name)
	}
}
