package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRandomTracesAccepted: traces of the real core under random events
// are behaviours of the spec, with and without their options file.
func TestRandomTracesAccepted(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		var buf bytes.Buffer
		o, err := Generate(&buf, GenOptions{Seed: seed, Steps: 150})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Validate(bytes.NewReader(buf.Bytes()), &o); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if seed%4 == 0 {
			if _, err := Validate(bytes.NewReader(buf.Bytes()), nil); err != nil {
				t.Fatalf("seed %d without options: %v", seed, err)
			}
		}
	}
}

// TestTamperedTraceRejected: changing one logged effect is caught.
func TestTamperedTraceRejected(t *testing.T) {
	var buf bytes.Buffer
	o, err := Generate(&buf, GenOptions{Seed: 7, Steps: 120})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	tampered := 0
	for k, l := range lines {
		if strings.Contains(l, `"ef":"Grant"`) && strings.Contains(l, `"version":1`) {
			lines[k] = strings.Replace(l, `"version":1`, `"version":2`, 1)
			tampered++
			break
		}
	}
	for k, l := range lines {
		if tampered == 1 && strings.Contains(l, `"code":"server_busy"`) {
			lines[k] = strings.Replace(l, `"code":"server_busy"`, `"code":"cancelled"`, 1)
			break
		}
	}
	if tampered == 0 {
		t.Fatal("nothing to tamper with")
	}
	_, err = Validate(strings.NewReader(strings.Join(lines, "\n")), &o)
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("tampered trace accepted (err %v)", err)
	}
	t.Log(te)
}

// TestValidateDir writes traces and their options into a directory, as the
// runtime does, and validates them all.
func TestValidateDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := ValidateDir(dir, &bytes.Buffer{}); !errors.Is(err, ErrNoTraces) {
		t.Fatalf("empty dir: %v", err)
	}
	for _, seed := range []uint64{3, 4} {
		var buf bytes.Buffer
		o, err := Generate(&buf, GenOptions{Seed: seed, Steps: 80})
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(dir, "gen-"+string(rune('0'+seed)))
		if err := os.WriteFile(base+".ndjson", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if seed == 3 {
			if err := WriteOptions(base+".options.json", o); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out bytes.Buffer
	res, err := ValidateDir(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "2 accepted, 0 rejected") {
		t.Fatalf("%s", out.String())
	}
}
