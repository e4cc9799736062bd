package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/notify"
	"github.com/toolgate/toolgate/signed"
)

// The demo's notifications (`toolgate demo --notify examples/notify.yaml`):
// a webhook receiver on loopback that checks each delivery's signature as a
// real receiver must, and prints what it got; the file's ${VAR}s for the
// receiver, its secret, the inbox's address and a link key are the demo's.

// Variables the demo sets for its notify file.
const (
	demoWebhookURL    = "TOOLGATE_WEBHOOK_URL"
	demoWebhookSecret = "TOOLGATE_WEBHOOK_SECRET"
	demoLinkBase      = "TOOLGATE_LINK_BASE"
	demoLinkKeyFile   = "TOOLGATE_LINK_KEY_FILE"
)

// demoReceiver is the demo's webhook receiver.
type demoReceiver struct {
	served
	secret string
	out    io.Writer
	mu     sync.Mutex
	seen   map[string]bool // deliveries shown, by idempotency key
	got    int
}

// demoNotify starts the receiver and loads file with the demo's variables;
// links point to inboxURL.
func (c *cli) demoNotify(file, data, inboxURL string) (*demoReceiver, *notify.Config, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, nil, err
	}
	r := &demoReceiver{secret: hex.EncodeToString(b), out: c.stdout, seen: map[string]bool{}}
	keyFile, err := demoLinkKey(filepath.Join(data, "keys", "link.key"))
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("the demo's webhook receiver: %w", err)
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	r.URL = "http://" + ln.Addr().String() + "/hook"
	go func() { _ = r.srv.Serve(ln) }()
	vars := map[string]string{demoWebhookURL: r.URL, demoWebhookSecret: r.secret, demoLinkBase: strings.TrimRight(inboxURL, "/"), demoLinkKeyFile: keyFile}
	n, err := notify.LoadWith(file, func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		r.stop()
		return nil, nil, err
	}
	fmt.Fprintf(c.stdout, "notify %s: a webhook receiver at %s checks each delivery's X-Toolgate-Signature and prints it\n", file, r.URL)
	return r, n, nil
}

// demoLinkKey makes the demo's link key at path if it is not there yet.
func demoLinkKey(path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	_, priv, err := signed.GenerateKey()
	if err != nil {
		return "", err
	}
	return path, signed.WritePrivateKey(path, priv)
}

// ServeHTTP takes one delivery: refused unless its signature verifies; a
// retry of a delivery already shown (the same Idempotency-Key) is answered
// and not shown again.
func (r *demoReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := notify.VerifySignature(r.secret, req.Header.Get(notify.SignatureHeader), body, time.Now(), notify.DefaultSignatureWindow); err != nil {
		fmt.Fprintf(r.out, "webhook: REFUSED a delivery: %v\n", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	key := req.Header.Get("Idempotency-Key")
	if r.seen[key] {
		fmt.Fprintf(r.out, "webhook: delivery %s again (a retry): already shown\n", key)
		return
	}
	r.seen[key] = true
	r.got++
	var b notify.WebhookBody
	if err := json.Unmarshal(body, &b); err != nil {
		fmt.Fprintf(r.out, "webhook: a signed delivery that is not toolgate's JSON: %v\n", err)
		return
	}
	what := b.Event
	if b.Tool != "" {
		what += ": " + oneLine(b.Tool) + " " + oneLine(b.CallID) + " " + oneLineBytes(b.Args)
	}
	switch {
	case b.Decision != "":
		what += " — " + oneLine(b.Decision) + " by " + oneLine(b.By)
	case b.Error != "":
		what += " — " + oneLine(b.Error)
	}
	fmt.Fprintf(r.out, "webhook ← %s (signature verified; delivery %s)\n", what, oneLine(key))
	if b.Link != "" {
		fmt.Fprintf(r.out, "          confirm page: %s (opening it decides nothing)\n", oneLine(b.Link))
	}
}

// received is how many distinct deliveries the receiver took.
func (r *demoReceiver) received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}
