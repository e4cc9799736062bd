package ops_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/testsuite/testenv"
)

// waitNext waits until `toolgate next ID CONN...` says want (such as
// gate:close_ticket).
func waitNext(t *testing.T, id, want string, conn ...string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, id+" at "+want, func() error {
		res := toolgate(t, append([]string{"next", id}, conn...)...)
		if got := strings.TrimSpace(res.stdout); got != want {
			return fmt.Errorf("next: %q %s", got, res.stderr)
		}
		return nil
	})
}

// waitCompleted waits until `toolgate status ID CONN...` says the run completed.
func waitCompleted(t *testing.T, id string, conn ...string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, id+" completed", func() error {
		res := toolgate(t, append([]string{"status", id}, conn...)...)
		if !strings.Contains(res.stdout, "status: completed") {
			return fmt.Errorf("status: %q %s", res.stdout, res.stderr)
		}
		return nil
	})
}

// newKeyFile makes an encryption key file in dir with `toolgate keys
// encryption`, and returns its path and its key's id.
func newKeyFile(t *testing.T, dir string) (path, id string) {
	t.Helper()
	path = filepath.Join(dir, "keys.json")
	res := toolgate(t, "keys", "encryption", path)
	require.Equal(t, 0, res.code, res.stderr)
	kr, err := encryption.LoadKeyring(path)
	require.NoError(t, err)
	return path, kr.Newest()
}
