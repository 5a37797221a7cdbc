package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// Serving TLS (--tls-cert, --tls-key): OpenAI's realtime clients force
// wss:, so a server they reach directly must speak TLS. Both flags name
// PEM files, read once at New (a missing or mismatched pair fails the
// start, never the first handshake). Every route is then HTTPS, over
// HTTP/1.1 only: WebSocket upgrades need it, and one protocol keeps the
// edge's connection rules (deadlines, shutdown) the same as without TLS.
// The edge tracks the TCP connections under the TLS ones.

// tlsConfig loads the certificate pair of c, nil when neither flag is set.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.TLSCert == "" && c.TLSKey == "" {
		return nil, nil
	}
	if c.TLSCert == "" || c.TLSKey == "" {
		return nil, errors.New("server: --tls-cert and --tls-key go together")
	}
	pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("server: --tls-cert/--tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}, nil
}

// listener is ln as the HTTP server accepts it: the edge's tracked
// connections, under TLS when it is on.
func (s *Server) listener(ln net.Listener) net.Listener {
	ln = s.edge.Listener(ln)
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	return ln
}
