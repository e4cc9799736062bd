package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/toolgate/toolgate/codecserver"
	"github.com/toolgate/toolgate/encryption"
)

// devCodec is the codec server `toolgate dev --encryption-key-file` runs on
// a free loopback port for its embedded Web UI. It listens before the UI
// exists (the UI's settings name it), and answers once it knows the UI's
// origin, the only one CORS then allows.
type devCodec struct {
	srv *codecserver.Server
	key *encryption.Keyring
	h   atomic.Pointer[http.Handler]
}

func startDevCodec(ctx context.Context, keyFile string) (*devCodec, error) {
	k, err := encryption.LoadKeyring(keyFile)
	if err != nil {
		return nil, err
	}
	d := &devCodec{key: k}
	d.srv, err = codecserver.Listen(ctx, "127.0.0.1:0", http.HandlerFunc(d.serve), nil)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (d *devCodec) serve(w http.ResponseWriter, r *http.Request) {
	h := d.h.Load()
	if h == nil {
		http.Error(w, "codec server: not ready (the Web UI is starting)", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// allow starts answering, with CORS for the UI at uiAddress (host:port) by
// its IP and as localhost.
func (d *devCodec) allow(uiAddress string) error {
	_, port, err := net.SplitHostPort(uiAddress)
	if err != nil {
		return fmt.Errorf("codec server: the UI's address %q: %w", uiAddress, err)
	}
	h, err := codecserver.New(codecserver.Options{Codec: d.key.Codec(),
		Origins: []string{"http://" + uiAddress, "http://localhost:" + port}})
	if err != nil {
		return err
	}
	d.h.Store(&h)
	return nil
}

func (d *devCodec) close() { d.srv.Close() }
