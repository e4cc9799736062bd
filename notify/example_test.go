package notify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/toolgate/toolgate/notify"
)

// A webhook receiver checks each delivery before it trusts a byte of it
// (docs/notifications.md shows this handler's body).
func ExampleVerifySignature() {
	const secret = "s3cret"
	receive := func(w http.ResponseWriter, r *http.Request) {
		// README:begin
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := notify.VerifySignature(secret, r.Header.Get("X-Toolgate-Signature"), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized) // says which check failed
			return
		}
		// README:end
		fmt.Fprintf(w, "taken: %s", body)
	}
	for _, sig := range []string{notify.Sign(secret, time.Now(), []byte(`{"event":"waiting"}`)), notify.Sign("guessed", time.Now(), []byte(`{"event":"waiting"}`))} {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(`{"event":"waiting"}`))
		req.Header.Set("X-Toolgate-Signature", sig)
		rec := httptest.NewRecorder()
		receive(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 taken: {"event":"waiting"}
	// 401 signature mismatch: not signed with this secret, or the body was changed
}
