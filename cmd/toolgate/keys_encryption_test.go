package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolgate/toolgate/encryption"
)

func TestKeysEncryption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets", "enc.json") // its directory made by the command
	line := regexp.MustCompile(`^wrote (.+): key (k-\d{8}-[0-9a-f]{4}) \(newest of (\d+); mode 0600\)\n$`)

	var ids []string
	for n := 1; n <= 3; n++ {
		out, stderr, err := runKeys(t, "encryption", path)
		require.NoError(t, err, stderr)
		m := line.FindStringSubmatch(out)
		require.NotNil(t, m, "output:\n%s", out)
		assert.Equal(t, path, m[1])
		assert.Equal(t, []string{"1", "2", "3"}[n-1], m[3])
		ids = append(ids, m[2])

		k, err := encryption.LoadKeyring(path)
		require.NoError(t, err)
		assert.Equal(t, ids, k.IDs())
		assert.Equal(t, m[2], k.Newest())

		// The key itself is never printed.
		var kf struct {
			Keys []struct{ Key string } `json:"keys"`
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &kf))
		for _, key := range kf.Keys {
			raw, err := base64.StdEncoding.DecodeString(key.Key)
			require.NoError(t, err)
			assert.NotContains(t, out+stderr, key.Key)
			assert.NotContains(t, out+stderr, base64.RawURLEncoding.EncodeToString(raw))
		}
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

		// A file others can read is refused, not added to.
		require.NoError(t, os.Chmod(path, 0o644))
		_, _, err = runKeys(t, "encryption", path)
		assert.ErrorContains(t, err, "chmod 600")
		k, err := encryption.LoadKeyring(path)
		assert.Error(t, err)
		assert.Nil(t, k)
	}

	for _, args := range [][]string{{"encryption"}, {"encryption", "a", "b"}, {"tls"}} {
		_, _, err := runKeys(t, args...)
		assert.Error(t, err, "%q", args)
	}
	_, _, err := runKeys(t)
	assert.ErrorContains(t, err, "keys encryption FILE", "the usage names both kinds")
	assert.ErrorContains(t, err, "keys new NAME")
}
