package edge

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// Cross-site and DNS-rebinding protection (CONTRACT.md err.host,
// err.origin; the class Ollama fixed as CVE-2024-28224).
//
// A browser page on any site can send requests to 127.0.0.1: the Host
// allow-list refuses a request addressed to a name the server was not
// told about (a rebinding page reaches the server under its own name), and
// the Origin check refuses state-changing requests a browser sends on
// behalf of another site.

// hostAllowList is the set of Host names (without port) the server
// answers, or nil when every Host is accepted (--allowed-hosts '*').
type hostAllowList struct {
	any   bool
	names map[string]bool // lower case, IPv6 without brackets
	exact map[string]bool // host:port entries of --allowed-hosts, lower case

	// lastAllowed is the Host value last found allowed: the lists never
	// change, so the same value again (a client's every request) is
	// allowed without splitting and lower-casing it again.
	lastAllowed atomic.Pointer[string]
}

// loopbackHosts are always allowed: a page can only reach them under these
// names, never under a name it controls.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// newHostAllowList builds the allow-list: the loopback names, the listen
// address's host unless it is unspecified (0.0.0.0, ::, empty: the
// machine's other addresses are not added automatically), and extra, the
// entries of --allowed-hosts (a name, a name:port, or "*" for any).
func newHostAllowList(listen string, extra []string) (*hostAllowList, error) {
	h := &hostAllowList{names: map[string]bool{}, exact: map[string]bool{}}
	for _, n := range loopbackHosts {
		h.names[n] = true
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
			h.names[normHost(host)] = true
		}
	}
	for _, e := range extra {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case e == "*":
			h.any = true
		case strings.ContainsAny(e, "/@?# "):
			return nil, fmt.Errorf("server: --allowed-hosts entry %q is not a host name", e)
		default:
			if host, port, err := net.SplitHostPort(e); err == nil && port != "" {
				h.exact[normHost(host)+":"+port] = true
			} else {
				h.names[normHost(e)] = true
			}
		}
	}
	return h, nil
}

// normHost lower-cases a host name, drops IPv6 brackets and a trailing dot.
func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// allowed reports whether a request's Host header value is allowed. An
// empty Host (HTTP/1.0 clients) is allowed: a browser always sends one.
// A listed name is allowed on any port: the port is not what a rebinding
// page controls.
func (h *hostAllowList) allowed(hostport string) bool {
	if h.any || hostport == "" {
		return true
	}
	if p := h.lastAllowed.Load(); p != nil && *p == hostport {
		return true
	}
	if !h.allowedUncached(hostport) {
		return false
	}
	last := new(string) // not &hostport: that would move every call's argument to the heap
	*last = hostport
	h.lastAllowed.Store(last)
	return true
}

func (h *hostAllowList) allowedUncached(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	host = normHost(host)
	if h.names[host] {
		return true
	}
	return port != "" && h.exact[host+":"+port]
}

// probePaths are exempt from the Host check: Kubernetes and load-balancer
// probes address the pod by its IP, and the answers are read-only and
// carry nothing (CONTRACT.md err.host; the inference protocol's two,
// oip.live and oip.ready).
func probePath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/v2/health/live" || p == "/v2/health/ready"
}

// CheckHost refuses a request whose Host is not allowed with 403
// permission_error host_not_allowed (CONTRACT.md err.host).
//
// Kept out of line, as edge.LimitBody is, so that its closure is compiled
// with the calls in it inlined.
//
//go:noinline
func (e *Edge) CheckHost(next http.Handler) http.Handler {
	h := e.hosts
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.allowed(r.Host) && !probePath(r.URL.Path) {
			e.writeError(w, r, &Error{Status: http.StatusForbidden, Type: "permission_error", Code: "host_not_allowed",
				Message: fmt.Sprintf("host %q is not allowed: start the server with --allowed-hosts to serve it", r.Host)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newOriginCheck builds the cross-origin check of state-changing requests
// from net/http.CrossOriginProtection: a POST, PUT, DELETE or PATCH with
// Sec-Fetch-Site other than same-origin or none, or (older browsers) with
// an Origin whose host is not the request's Host, is refused unless the
// Origin is one of trusted (--allowed-origins, scheme://host[:port]).
// Requests with neither header (curl, SDKs) pass.
func newOriginCheck(trusted []string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	for _, o := range trusted {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if err := c.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("server: --allowed-origins: %w", err)
		}
	}
	return c, nil
}

// CheckOrigin answers a refused cross-origin request with 403
// permission_error origin_not_allowed (CONTRACT.md err.origin).
//
// Kept out of line, as edge.LimitBody is, so that its closure is compiled
// with the calls in it inlined.
//
//go:noinline
func (e *Edge) CheckOrigin(next http.Handler) http.Handler {
	c := e.origins
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Check refuses only a request that carries Sec-Fetch-Site or
		// Origin; without either (curl, SDKs: most requests) it would
		// pass, and two map reads say so without its header lookups.
		if len(r.Header["Sec-Fetch-Site"]) == 0 && len(r.Header["Origin"]) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if err := c.Check(r); err != nil {
			msg := "cross-origin request refused"
			if o := r.Header.Get("Origin"); o != "" {
				msg = fmt.Sprintf("origin %q is not allowed: start the server with --allowed-origins to trust it", o)
			}
			e.writeError(w, r, &Error{Status: http.StatusForbidden, Type: "permission_error", Code: "origin_not_allowed",
				Message: msg, Err: err})
			return
		}
		next.ServeHTTP(w, r)
	})
}
