package replay_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/encryption"
	"github.com/toolgate/toolgate/replay"
)

// encrypted holds the fixtures recorded with payload encryption (go run
// ./testsuite/histories/record -encryption-key-file …) and their test key.
var encrypted = filepath.Join(histories, "encrypted")

// testKeyID is the id of the one key of encrypted/test.keys.
const testKeyID = "test-key-protects-nothing"

var encryptedFixtures = []string{"approve_v16.json", "policy_quorum_v16.json"}

// testKeyring loads encrypted/test.keys from a private copy: git keeps no
// mode but the executable bit, so the checked-out file is 0644, which
// LoadKeyring refuses.
func testKeyring(t *testing.T) *encryption.Keyring {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(encrypted, "test.keys"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "test.keys")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	require.NoError(t, os.Chmod(path, 0o600)) // whatever the umask
	k, err := encryption.LoadKeyring(path)
	require.NoError(t, err)
	require.Equal(t, []string{testKeyID}, k.IDs())
	return k
}

func readHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}

// TestEncryptedHistoriesReplay: the encrypted fixtures replay with their key,
// one by one and as the directory.
func TestEncryptedHistoriesReplay(t *testing.T) {
	k := testKeyring(t)
	for _, name := range encryptedFixtures {
		require.NoError(t, replay.File(filepath.Join(encrypted, name), replay.WithKeyring(k)), name)
	}
	require.NoError(t, replay.Dir(encrypted, replay.WithKeyring(k)))
}

// TestEncryptedHistoriesNeedTheKey: without a keyring, or with one that
// lacks the key, an encrypted fixture is refused before it is replayed,
// and the error names the key it needs.
func TestEncryptedHistoriesNeedTheKey(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other.json")
	_, _, err := encryption.AddKey(other)
	require.NoError(t, err)
	wrong, err := encryption.LoadKeyring(other)
	require.NoError(t, err)
	for _, name := range encryptedFixtures {
		file := filepath.Join(encrypted, name)
		err := replay.File(file)
		require.Error(t, err, "%s replayed without its key", name)
		require.Contains(t, err.Error(), testKeyID, name)
		require.Contains(t, err.Error(), name, "the error names the file")
		require.Contains(t, err.Error(), "--encryption-key-file")

		err = replay.File(file, replay.WithKeyring(wrong))
		require.Error(t, err, "%s replayed with another key file", name)
		require.Contains(t, err.Error(), testKeyID, name)
		var missing *encryption.MissingKeyError
		require.ErrorAs(t, err, &missing)
		require.Equal(t, testKeyID, missing.ID)
	}
}

// TestEncryptedHistoryAudits: with the key, audit verifies every signed
// decision of the encrypted policy_quorum fixture (dave's start, bob's and
// carol's approvals) and ties the refund to them; without it, it refuses.
func TestEncryptedHistoryAudits(t *testing.T) {
	file := filepath.Join(encrypted, "policy_quorum_v16.json")
	rep, err := audit.File(file, nil, audit.WithKeyring(testKeyring(t)))
	require.NoError(t, err)
	require.NotEmpty(t, rep.Entries)
	require.Empty(t, rep.Failed())
	require.Empty(t, rep.Mismatches())
	require.NotEmpty(t, rep.Executions)
	require.Equal(t, 16, rep.Version)
	signedN := 0
	for _, e := range rep.Entries {
		if e.Signed() {
			signedN++
			require.True(t, e.Verified, "%+v", e)
		}
	}
	require.GreaterOrEqual(t, signedN, 3, "dave's start, bob's and carol's approvals: %+v", rep.Entries)

	_, err = audit.File(file, nil)
	require.ErrorContains(t, err, testKeyID)
}

// TestEncryptedHistoriesHoldNoPlaintext: every payload of every event of
// the encrypted fixtures is sealed under the test key, except search
// attributes (never encrypted: the server indexes them).
func TestEncryptedHistoriesHoldNoPlaintext(t *testing.T) {
	for _, name := range encryptedFixtures {
		h := readHistory(t, filepath.Join(encrypted, name))
		sealed := 0
		for _, ev := range h.GetEvents() {
			eachPayload(ev.ProtoReflect(), func(path string, p *commonpb.Payload) {
				enc := string(p.GetMetadata()[converter.MetadataEncoding])
				require.Equal(t, encryption.MetadataEncoding, enc, "%s: event %d (%s) %s is %s", name, ev.GetEventId(), ev.GetEventType(), path, enc)
				require.Equal(t, testKeyID, string(p.GetMetadata()[encryption.MetadataKeyID]), "%s: event %d %s", name, ev.GetEventId(), path)
				sealed++
			})
		}
		require.NotZero(t, sealed, name)
		require.Equal(t, []string{testKeyID}, encryption.KeyIDs(h), name)
	}
}

var (
	payloadName          = (&commonpb.Payload{}).ProtoReflect().Descriptor().FullName()
	searchAttributesName = (&commonpb.SearchAttributes{}).ProtoReflect().Descriptor().FullName()
)

// eachPayload calls f for every Payload within m, with its field path, but
// not for those within search attributes.
func eachPayload(m protoreflect.Message, f func(string, *commonpb.Payload)) {
	var visit func(path string, m protoreflect.Message)
	visit = func(path string, m protoreflect.Message) {
		switch m.Descriptor().FullName() {
		case searchAttributesName:
			return
		case payloadName:
			f(path, m.Interface().(*commonpb.Payload))
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := path + "." + string(fd.Name())
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					visit(p, v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					visit(p+"["+k.String()+"]", mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				visit(p, v.Message())
			}
			return true
		})
	}
	visit("", m)
}
