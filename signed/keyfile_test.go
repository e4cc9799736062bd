package signed

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permissions")
	}
	pub, priv, err := GenerateKey()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "keys")
	path := filepath.Join(dir, "bob.key")
	require.NoError(t, WritePrivateKey(path, priv))

	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	got, err := ReadPrivateKey(path)
	require.NoError(t, err)
	assert.True(t, priv.Equal(got))
	assert.True(t, pub.Equal(got.Public()))

	// Never overwrites: the first key stays.
	_, other, err := GenerateKey()
	require.NoError(t, err)
	err = WritePrivateKey(path, other)
	assert.ErrorContains(t, err, "exists")
	got, err = ReadPrivateKey(path)
	require.NoError(t, err)
	assert.True(t, priv.Equal(got))

	// Not even through a dangling symlink.
	link := filepath.Join(dir, "link.key")
	require.NoError(t, os.Symlink(filepath.Join(dir, "target.key"), link))
	assert.Error(t, WritePrivateKey(link, other))
	_, err = os.Lstat(filepath.Join(dir, "target.key"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A key others can read is refused, saying what to do.
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o602} {
		require.NoError(t, os.Chmod(path, mode))
		_, err = ReadPrivateKey(path)
		assert.ErrorContains(t, err, "chmod 600", "mode %o", mode)
	}
	require.NoError(t, os.Chmod(path, 0o400))
	_, err = ReadPrivateKey(path)
	assert.NoError(t, err)

	assert.Error(t, WritePrivateKey(filepath.Join(dir, "short.key"), priv[:5]))
	_, err = os.Stat(filepath.Join(dir, "short.key"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestReadPrivateKeyRefuses(t *testing.T) {
	dir := t.TempDir()
	_, priv, err := GenerateKey()
	require.NoError(t, err)
	good := filepath.Join(dir, "good.key")
	require.NoError(t, WritePrivateKey(good, priv))
	pem, err := os.ReadFile(good)
	require.NoError(t, err)

	for name, data := range map[string]string{
		"empty":         "",
		"not PEM":       "ed25519:abc\n",
		"public key":    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n",
		"garbage DER":   "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"trailing data": string(pem) + "more\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
			_, err := ReadPrivateKey(p)
			assert.Error(t, err)
		})
	}
	_, err = ReadPrivateKey(filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = ReadPrivateKey(dir)
	assert.Error(t, err)
	var _ ed25519.PrivateKey = priv
}
