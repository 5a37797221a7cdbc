package baseurl

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080", "localhost": "http://localhost", "https://gw.example/sluice/": "https://gw.example/sluice",
		" http://[::1]:9/ ": "http://[::1]:9", "http://127.0.0.1:8080/": "http://127.0.0.1:8080",
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://h:1", "http://", "h:1/?q=1", "http://u:p@h:1", "h:port", "unix:///tmp/s"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q accepted", bad, got)
		}
	}
	if _, err := Parse("ftp://h:1"); err == nil || !strings.Contains(err.Error(), "scheme must be http or https") {
		t.Errorf("ftp: %v", err)
	}
}
