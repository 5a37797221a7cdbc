package main

import (
	"io"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/server"
)

// The serving-edge flags reach the server's Config (CONTRACT.md err.host,
// err.origin, err.max-models).
func TestServeEdgeFlags(t *testing.T) {
	o, err := parseServeFlags([]string{"--allowed-hosts", "sluice.internal, gw.example:9000,", "--allowed-origins", "https://dash.example",
		"--max-models", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.cfg.AllowedHosts, []string{"sluice.internal", "gw.example:9000"}) ||
		!slices.Equal(o.cfg.AllowedOrigins, []string{"https://dash.example"}) || o.cfg.MaxModels != 5 {
		t.Fatalf("%+v", o.cfg)
	}
	o, err = parseServeFlags(nil, io.Discard)
	if err != nil || o.cfg.MaxModels != server.DefaultMaxModels || o.cfg.AllowedHosts != nil || o.cfg.AllowedOrigins != nil {
		t.Fatalf("defaults: %+v %v", o.cfg, err)
	}
}
