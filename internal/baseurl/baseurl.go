// Package baseurl reads a --target flag: the base URL of a Sluice server,
// given as a URL or as host:port. cmd/sluice (models) and the conformance
// runner share it, so both accept the same spellings.
package baseurl

import (
	"fmt"
	"net/url"
	"strings"
)

// Parse turns a --target into a base URL without a trailing slash: a
// value without a scheme (host:port, host) is taken as http://; the scheme
// must be http or https and name a host; a query, fragment or user is
// refused.
func Parse(t string) (string, error) {
	t = strings.TrimSpace(t)
	if !strings.Contains(t, "://") {
		t = "http://" + t
	}
	u, err := url.Parse(t)
	if err != nil {
		return "", fmt.Errorf("%q is neither host:port nor a URL: %w", t, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: the scheme must be http or https", t)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q names no host", t)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: a base URL takes no query, fragment or user", t)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
