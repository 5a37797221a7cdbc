package modelsroot

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/server/internal/httpapi"
)

// Resolve keeps a checkpoint inside the root (its rules (1)-(5)) and Rel
// undoes it for a path inside the root.
func TestResolveAndRel(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "voices", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, cp := range []string{"../x", "voices/../../x", "/etc", outside, "escape", "voices/missing", `a\b`, "./voices"} {
		_, err := Resolve(root, cp)
		var e *httpapi.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Param != "checkpoint" {
			t.Fatalf("checkpoint %q: %v; want 400 naming checkpoint", cp, err)
		}
		if strings.Contains(e.Message, root) {
			t.Fatalf("checkpoint %q: the answer names the root: %s", cp, e.Message)
		}
	}
	for cp, want := range map[string]string{"": "", "builtin-voice": "builtin-voice"} {
		if got, err := Resolve(root, cp); err != nil || got != want {
			t.Fatalf("Resolve(%q) = %q, %v; want %q", cp, got, err, want)
		}
	}
	got, err := Resolve(root, "voices/a")
	if err != nil || !filepath.IsAbs(got) {
		t.Fatalf("Resolve(voices/a) = %q, %v; want an absolute path", got, err)
	}
	if rel := Rel(root, got); rel != "voices/a" {
		t.Fatalf("Rel(%q) = %q, want voices/a", got, rel)
	}
	if rel := Rel(root, outside); rel != outside {
		t.Fatalf("Rel of a path outside the root = %q, want it unchanged", rel)
	}
}

// A refused root says how many entries failed, never their names
// (CONTRACT.md err.models-root-leak); a root that could not be recorded
// is 500.
func TestScanErrorNamesNothingInside(t *testing.T) {
	root := t.TempDir()
	err := backends.AsInvalid(errors.Join(errors.New("secret-a: bad"), errors.New("secret-b: bad")))
	e := ScanError(root, err)
	if e.Status != http.StatusBadRequest || e.Code != "invalid_models_root" || strings.Contains(e.Message, "secret") ||
		!strings.Contains(e.Message, "2 of its entries") {
		t.Fatalf("ScanError = %+v", e)
	}
	if e := ScanError(root, errNotDurable{errors.New("disk full")}); e.Status != http.StatusInternalServerError {
		t.Fatalf("not durable: %+v", e)
	}
	if l := ListOf(root, nil, err); l.Error == "" || strings.Contains(l.Error, "secret") || len(l.Data) != 0 || l.Data == nil {
		t.Fatalf("ListOf = %+v", l)
	}
}
