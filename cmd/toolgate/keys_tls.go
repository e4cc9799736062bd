package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolgate/toolgate/devtls"
)

const keysTLSUsage = "usage: toolgate keys tls DIR [--host H]... [--client-name CN] [--valid-for DURATION]"

// keysTLS is `toolgate keys tls DIR [--host H]...`: a throwaway CA, a server
// certificate for 127.0.0.1, ::1, localhost and the --host names, and a
// client certificate, for `toolgate dev --tls-*` (devtls.Generate).
func (c *cli) keysTLS(args []string) error {
	fs := c.flags("keys tls")
	var hosts listFlag
	fs.Var(&hosts, "host", "another IP address or DNS name for the server certificate (repeatable, or comma-separated); 127.0.0.1, ::1 and localhost are always in it")
	clientName := fs.String("client-name", devtls.DefaultClientName, "the client certificate's common name")
	validFor := fs.Duration("valid-for", devtls.DefaultValidity, "how long the certificates are valid")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New(keysTLSUsage)
	}
	if *validFor <= 0 {
		return fmt.Errorf("--valid-for %v: want a positive duration", *validFor)
	}
	dir := pos[0]
	f, err := devtls.Generate(dir, devtls.Options{Hosts: hosts, ClientName: *clientName, Validity: *validFor})
	if err != nil {
		return err
	}
	names := append(append([]string{}, devtls.DefaultHosts...), hosts...)
	fmt.Fprintf(c.stdout, `wrote (mode 0600; for development only, valid until %s):
  %s  the CA: servers and clients trust it
  %s  the CA's key: anyone who reads it can make clients
  %s, %s  the server's, for %s
  %s, %s  a client's (CN %s)
serve with mutual TLS:
  toolgate dev --tls-cert %s --tls-key %s --tls-client-ca %s
and connect clients with:
  --tls-ca %s --tls-cert %s --tls-key %s
`,
		time.Now().Add(*validFor).Format(time.DateOnly),
		f.CA, f.CAKey, f.ServerCert, f.ServerKey, strings.Join(names, ", "), f.ClientCert, f.ClientKey, *clientName,
		f.ServerCert, f.ServerKey, f.CA, f.CA, f.ClientCert, f.ClientKey)
	return nil
}
