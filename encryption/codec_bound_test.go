package encryption

import (
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
)

// A payload's key id comes from whoever wrote the payload: a long one is
// refused without being echoed.
func TestLongKeyIDIsNotEchoed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	if _, _, err := AddKey(path); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100000)
	_, err = k.Codec().Decode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte(MetadataEncoding), MetadataKeyID: []byte(long)}, Data: make([]byte, 64)}})
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "100000 bytes") {
		t.Fatalf("decode with a 100000-byte key id: %v", err)
	}
}
