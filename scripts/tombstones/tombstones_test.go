package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestErrorCode: an error answer reads as its code and message; anything
// else as its first line.
func TestErrorCode(t *testing.T) {
	body := `{"error":{"message":"too many","type":"invalid_request_error","param":null,"code":"too_many_models"}}`
	if got := errorCode(body); got != "too_many_models: too many" {
		t.Fatalf("errorCode = %q", got)
	}
	if got := errorCode("plain\nsecond"); got != "plain" {
		t.Fatalf("errorCode of text = %q", got)
	}
}

// TestDirSize counts the bytes of every file below a folder.
func TestDirSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, n := range map[string]int{"x": 3, "a/y": 5} {
		if err := os.WriteFile(filepath.Join(dir, p), make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := dirSize(dir); got != "8 bytes" {
		t.Fatalf("dirSize = %q", got)
	}
}
