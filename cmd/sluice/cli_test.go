package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/server"
)

// `sluice version` prints the module version, the VCS revision with its
// dirty flag, and the Go version.
func TestVersion(t *testing.T) {
	var out, errs bytes.Buffer
	if code := mainCode([]string{"version"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.HasPrefix(out.String(), "sluice ") || !strings.Contains(out.String(), "\nrevision: ") ||
		!strings.Contains(out.String(), "\ngo: go1.") {
		t.Fatalf("version output:\n%s", out.String())
	}
	got := formatVersion(server.Build{Version: "v1.2.3", Revision: "0123abcd", Time: "2026-12-01T20:00:00Z", Modified: true,
		GoVersion: "go1.26.8"})
	want := "sluice v1.2.3\nrevision: 0123abcd (modified)\ncommit time: 2026-12-01T20:00:00Z\ngo: go1.26.8\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := formatVersion(server.Build{Version: "(devel)", GoVersion: "go1.26.8"}); got !=
		"sluice (devel)\nrevision: unknown (built without VCS information)\ngo: go1.26.8\n" {
		t.Fatalf("without VCS data:\n%s", got)
	}
	errs.Reset()
	if code := mainCode([]string{"version", "extra"}, &out, &errs); code != 2 || strings.Count(errs.String(), "\n") != 1 {
		t.Fatalf("exit %d: %q", code, errs.String())
	}
}

// An unknown command or flag is one line naming the mistake and where help
// is, exit 2; not the whole usage.
func TestUsageMistakes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, "sluice: unknown command \"bogus\"; run 'sluice help'\n"},
		{[]string{"serve", "--bogus"}, "sluice serve: flag provided but not defined: -bogus; run 'sluice serve -h'\n"},
		{[]string{"models", "--nope=1"}, "sluice models: flag provided but not defined: -nope; run 'sluice models -h'\n"},
		{[]string{"run", "--nope"}, "sluice run: flag provided but not defined: -nope; run 'sluice run -h'\n"},
		{[]string{"serve", "stray"}, "sluice serve: unexpected arguments [\"stray\"]; run 'sluice serve -h'\n"},
		{[]string{"serve", "--max-conns", "many"}, "sluice serve: invalid value \"many\" for flag -max-conns: parse error; run 'sluice serve -h'\n"},
	} {
		var out, errs bytes.Buffer
		if code := mainCode(c.args, &out, &errs); code != 2 || errs.String() != c.want || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit 2, stderr %q", c.args, code, errs.String(), out.String(), c.want)
		}
	}
}

// `sluice models --target` takes host:port without a scheme (http://).
func TestModelsTargetHostPort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(server.ModelList{Object: "list", Data: []server.Model{{ID: "tts-one", State: "ready"}}})
	}))
	defer srv.Close()
	var out, errs bytes.Buffer
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	if code := mainCode([]string{"models", "--target", hostPort}, &out, &errs); code != 0 || !strings.Contains(out.String(), "tts-one") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errs.String())
	}
	for in, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080", "localhost": "http://localhost", "https://gw.example/sluice/": "https://gw.example/sluice",
		" http://[::1]:9/ ": "http://[::1]:9",
	} {
		if got, err := targetURL(in); err != nil || got != want {
			t.Errorf("targetURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://h:1", "http://", "h:1/?q=1", "http://u:p@h:1", "h:port"} {
		if got, err := targetURL(bad); err == nil {
			t.Errorf("targetURL(%q) = %q accepted", bad, got)
		}
	}
	errs.Reset()
	if code := mainCode([]string{"models", "--target", "ftp://h:1"}, &out, &errs); code != 2 || strings.Count(errs.String(), "\n") != 1 ||
		!strings.Contains(errs.String(), "scheme must be http or https") {
		t.Fatalf("exit %d: %q", code, errs.String())
	}
}

// `sluice serve -h` has a description, every flag in a named group, and an
// example; it never prints a key taken from the environment.
func TestServeHelp(t *testing.T) {
	t.Setenv("SLUICE_API_KEY", "s3cret-from-env")
	var out, errs bytes.Buffer
	if code := mainCode([]string{"serve", "-h"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	help := errs.String()
	for _, want := range []string{"usage: sluice serve [flags]", "serve runs the Sluice HTTP server", "Listening and limits:",
		"Models:", "Keys and access:", "Timeouts:", "State, logs and tracing:", "Example:\n  SLUICE_API_KEY="} {
		if !strings.Contains(help, want) {
			t.Errorf("no %q in serve -h:\n%s", want, help)
		}
	}
	if strings.Contains(help, "Other:") || strings.Contains(help, "s3cret-from-env") {
		t.Errorf("a flag outside the groups, or the key printed:\n%s", help)
	}
	if _, err := parseServeFlags([]string{"-h"}, io.Discard); err != flag.ErrHelp {
		t.Fatalf("-h: %v", err)
	}
	var names int
	grouped := map[string]int{}
	for _, g := range serveFlagGroups {
		for _, n := range g.flags {
			grouped[n]++
			names++
			if !strings.Contains(help, "\n  --"+n+" ") && !strings.Contains(help, "\n  --"+n+"\n") {
				t.Errorf("--%s not in serve -h", n)
			}
		}
	}
	for n, c := range grouped {
		if c != 1 {
			t.Errorf("--%s in %d groups", n, c)
		}
	}
	if strings.Count(help, "\n  --") != names {
		t.Errorf("%d flags printed, %d grouped", strings.Count(help, "\n  --"), names)
	}
}

// The parallel runtime's startup warning is one short line (CONTRACT.md
// mode.parallel keeps the details).
func TestParallelWarningShort(t *testing.T) {
	if w := server.ParallelWarning; len(w) > 160 || strings.ContainsAny(w, "\n") ||
		!strings.HasPrefix(w, "parallel runtime enabled (--parallel-jobs): experimental") {
		t.Fatalf("%d characters: %q", len(w), w)
	}
}
