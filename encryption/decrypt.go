package encryption

import (
	"context"
	"fmt"
	"strings"

	historypb "go.temporal.io/api/history/v1"

	"github.com/toolgate/toolgate/internal/text"
)

// Decrypt is DecodeHistory for readers of exported histories (replay, audit)
// that may or may not have been given a key file: with k nil, a history with
// encrypted payloads is refused, naming the keys it needs, and one without
// any is left as it is.
func Decrypt(ctx context.Context, h *historypb.History, k *Keyring) error {
	if k == nil {
		if ids := KeyIDs(h); len(ids) > 0 {
			return fmt.Errorf("its payloads are encrypted (key %s): give the encryption key file that holds it (--encryption-key-file)", listIDs(ids))
		}
		return nil
	}
	return DecodeHistory(ctx, h, k)
}

// listIDs names key ids for an error, each clipped and at most five of them
// (a history's ids are whatever its payloads say).
func listIDs(ids []string) string {
	const most = 5
	var out []string
	for i, id := range ids {
		if i == most {
			out = append(out, fmt.Sprintf("and %d more", len(ids)-most))
			break
		}
		out = append(out, text.Clip(id, 2*maxIDLen))
	}
	return strings.Join(out, ", ")
}
