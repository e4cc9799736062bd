package replay_test

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/replay"
)

// kinds are every kind of failed replay.
var kinds = []error{replay.ErrUnreadable, replay.ErrNeedsKey, replay.ErrWrongKey, replay.ErrNondeterministic, replay.ErrReplayFailed}

// requireKind checks that err is of kind want and of no other kind.
func requireKind(t *testing.T, err, want error) {
	t.Helper()
	require.Error(t, err)
	for _, k := range kinds {
		require.Equal(t, k == want, errors.Is(err, k), "%v: errors.Is(%v) — want kind %v", err, k, want)
	}
}

// TestReplayOfAMissingOrBadFileSaysSo: a history file that is not there,
// or is not a history, is named with what is wrong (the OS's error), and
// is no nondeterminism.
func TestReplayOfAMissingOrBadFileSaysSo(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "gone.json")
	err := replay.File(missing)
	requireKind(t, err, replay.ErrUnreadable)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, err.Error(), "cannot read the history file: open "+missing+": no such file or directory")

	garbage := filepath.Join(dir, "garbage.json")
	require.NoError(t, os.WriteFile(garbage, []byte("not json"), 0o644))
	err = replay.File(garbage)
	requireKind(t, err, replay.ErrUnreadable)
	require.Contains(t, err.Error(), garbage+": not a history exported as JSON")

	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte("{}"), 0o644))
	err = replay.File(empty)
	requireKind(t, err, replay.ErrUnreadable)
	require.Contains(t, err.Error(), "no events: not a history exported as JSON")
}

// TestReplayOfAnEncryptedHistorySaysWhichKey: an encrypted history replayed
// without a key says to pass --encryption-key-file; with a key file that
// lacks its key, or holds another key under its key's id, that the key file
// does not decrypt it. Neither is a nondeterminism.
func TestReplayOfAnEncryptedHistorySaysWhichKey(t *testing.T) {
	file := filepath.Join(encrypted, "approve_v16.json")
	err := replay.File(file)
	requireKind(t, err, replay.ErrNeedsKey)
	require.Contains(t, err.Error(), "its payloads are encrypted (key "+testKeyID+"): pass --encryption-key-file FILE")

	other := filepath.Join(t.TempDir(), "other.json")
	_, _, err = encryption.AddKey(other)
	require.NoError(t, err)
	wrong, err := encryption.LoadKeyring(other)
	require.NoError(t, err)
	err = replay.File(file, replay.WithKeyring(wrong))
	requireKind(t, err, replay.ErrWrongKey)
	require.Contains(t, err.Error(), "the key file "+other+" does not decrypt these payloads (they are encrypted with key "+testKeyID+", which it lacks)")
	var missing *encryption.MissingKeyError
	require.ErrorAs(t, err, &missing)

	// The same key id, another key.
	impostor := filepath.Join(t.TempDir(), "impostor.json")
	require.NoError(t, os.WriteFile(impostor, []byte(`{"keys":[{"id":"`+testKeyID+`","key":"`+
		base64.StdEncoding.EncodeToString(make([]byte, encryption.KeySize))+`"}]}`), 0o600))
	require.NoError(t, os.Chmod(impostor, 0o600))
	k, err := encryption.LoadKeyring(impostor)
	require.NoError(t, err)
	err = replay.File(file, replay.WithKeyring(k))
	requireKind(t, err, replay.ErrWrongKey)
	require.Contains(t, err.Error(), "the key file "+impostor+" does not decrypt these payloads (")
	require.Contains(t, err.Error(), "authentication failed")
}
