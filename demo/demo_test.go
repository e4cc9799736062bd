package demo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/plan"
)

func TestOptionsAreTheDemoWorker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	o, d, err := Options(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, o.Validate())
	require.NotEmpty(t, o.Tools)
	require.Equal(t, []string{plan.KindOpenAI, plan.KindSupport}, o.Config().Planners)
	require.FileExists(t, filepath.Join(dir, DeskFile))
	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "the data directory is private")
}
