package devserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/primitives"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// TLSOptions makes the frontend serve TLS (Options.TLS).
//
// With TLS, the frontend's gRPC port (Server.Address) speaks TLS only, with
// CertFile, and refuses plaintext; with ClientCAFile it also requires every
// client to present a certificate signed by that CA (mutual TLS) and refuses
// those without one. The HTTP API (Options.HTTPAPI) is served with the same
// TLS settings (https, client certificate required with ClientCAFile).
//
// The server's own parts cannot present a client certificate (the server
// has no key of the client CA), so they reach the server through a second
// frontend, Temporal's "internal-frontend" service, that serves plaintext on
// 127.0.0.1 only (Server.InternalAddress): the system worker (schedules, the
// per-namespace workers), the Web UI (Options.UIAddress), Start's own client
// (namespace and search attributes), the cluster's own address, and
// `toolgate dev`'s worker. So client certificates keep out other machines,
// not other processes of this machine: any local process may connect to
// InternalAddress without a certificate (and the internal frontend treats its
// callers as the system). That suits a dev server and a rehearsal of a
// production setup on one machine; a production cluster runs its own
// frontends.
type TLSOptions struct {
	// CertFile and KeyFile are the server's certificate (PEM, the chain
	// after the leaf) and its private key (PEM). Required. The certificate
	// must name the host clients dial (devtls's are for 127.0.0.1, ::1 and
	// localhost, and the hosts it is given).
	CertFile string
	KeyFile  string
	// ClientCAFile, when set, is a PEM file of CA certificates: clients must
	// present a certificate that one of them signed, or are refused. Empty:
	// TLS without client certificates.
	ClientCAFile string
}

// check reports what is wrong with the files (the server would exit the
// process on a TLS file it cannot load) and returns the options with
// absolute paths.
func (t *TLSOptions) check() (*TLSOptions, error) {
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("devserver: TLS needs CertFile and KeyFile")
	}
	out := &TLSOptions{}
	for _, p := range []struct{ from, to *string }{{&t.CertFile, &out.CertFile}, {&t.KeyFile, &out.KeyFile}, {&t.ClientCAFile, &out.ClientCAFile}} {
		if *p.from == "" {
			continue
		}
		abs, err := filepath.Abs(*p.from)
		if err != nil {
			return nil, fmt.Errorf("devserver: TLS: %w", err)
		}
		*p.to = abs
	}
	if _, err := tls.LoadX509KeyPair(out.CertFile, out.KeyFile); err != nil {
		return nil, fmt.Errorf("devserver: TLS certificate %s and key %s: %w", out.CertFile, out.KeyFile, err)
	}
	if out.ClientCAFile != "" {
		pem, err := os.ReadFile(out.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("devserver: TLS client CA: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("devserver: TLS client CA %s: no PEM certificate in it", out.ClientCAFile)
		}
	}
	return out, nil
}

// internalFrontend is the name of Temporal's internal frontend service.
const internalFrontend = string(primitives.InternalFrontendService)

// applyTLS makes cfg's frontend serve TLS per t, its client certificates
// checked against t.ClientCAFile and extraCAs (the CA of the server's own
// clients' certificate, under authorization: see localClientTLS).
func applyTLS(cfg *config.Config, t *TLSOptions, extraCAs []string) {
	cfg.Global.TLS.Frontend.Server = config.ServerTLS{
		CertFile: t.CertFile,
		KeyFile:  t.KeyFile,
	}
	if t.ClientCAFile != "" {
		cfg.Global.TLS.Frontend.Server.ClientCAFiles = append([]string{t.ClientCAFile}, extraCAs...)
		cfg.Global.TLS.Frontend.Server.RequireClientAuth = true
	}
}

// addInternalFrontend adds a plaintext internal frontend on 127.0.0.1
// (ports from next; with an HTTP port when http, for the server's Nexus
// requests) for the server's own clients (see TLSOptions and AuthOptions),
// and returns its address.
func addInternalFrontend(cfg *config.Config, next func() (int, error), http bool) (string, error) {
	// Internode TLS stays off: history, matching, worker and the internal
	// frontend listen on 127.0.0.1 only.
	ife := config.Service{RPC: config.RPC{BindOnLocalHost: true}}
	var err error
	if ife.RPC.GRPCPort, err = next(); err != nil {
		return "", err
	}
	if ife.RPC.MembershipPort, err = next(); err != nil {
		return "", err
	}
	if http {
		if ife.RPC.HTTPPort, err = next(); err != nil {
			return "", err
		}
	}
	cfg.Services[internalFrontend] = ife
	// With an internal frontend the server's clients find it through
	// membership, and publicClient must be empty (config.Validate).
	cfg.PublicClient = config.PublicClient{}
	addr := fmt.Sprintf("127.0.0.1:%d", ife.RPC.GRPCPort)
	// The cluster's own address (its admin and frontend clients of "remote"
	// clusters, the current one included) is dialed with no TLS either.
	info := cfg.ClusterMetadata.ClusterInformation[clusterName]
	info.RPCAddress = addr
	cfg.ClusterMetadata.ClusterInformation[clusterName] = info
	return addr, nil
}

// awaitListening waits until the public frontend accepts TCP connections
// (its readiness behind the listener is the internal frontend's: one server).
func (s *Server) awaitListening(ctx context.Context) error {
	var d net.Dialer
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(callCtx, "tcp", s.address)
		cancel()
		if err == nil {
			return conn.Close()
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("devserver: frontend %s not listening: %w", s.address, err)
		}
	}
}

// publicOnly wraps interceptors so that they see only the calls that came
// to the frontend's port (not the internal frontend's).
func publicOnly(port int, interceptors []grpc.UnaryServerInterceptor) []grpc.UnaryServerInterceptor {
	out := make([]grpc.UnaryServerInterceptor, len(interceptors))
	for i, ic := range interceptors {
		out[i] = func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
				if a, ok := p.LocalAddr.(*net.TCPAddr); ok && a.Port != port {
					return h(ctx, req)
				}
			}
			return ic(ctx, req, info, h)
		}
	}
	return out
}
