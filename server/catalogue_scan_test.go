package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/catalogue"
)

// scanHook holds the scans of one root at a hook: each sends its context on
// entered and waits for release or for its context to end.
type scanHook struct {
	entered chan context.Context
	release chan struct{}
}

func holdScans(ts *tserver, root string) *scanHook {
	h := &scanHook{entered: make(chan context.Context, 4), release: make(chan struct{})}
	inner := ts.s.roots.Scan
	ts.s.roots.Scan = func(ctx context.Context, r string) (*catalogue.Catalogue, error) {
		if r == root {
			h.entered <- ctx
			select {
			case <-h.release:
			case <-ctx.Done():
			}
		}
		return inner(ctx, r)
	}
	return h
}

func putRoot(ts *tserver, ctx context.Context, root string) (int, error) {
	body, _ := json.Marshal(ModelsRootRequest{ModelsRoot: root})
	req, err := http.NewRequestWithContext(ctx, "PUT", ts.url+"/v1/settings/models-root", strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := ts.client.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// GET /v1/catalogue answers from the last completed scan while a change of
// models root is still scanning, including the first read, which scans the
// configured root itself rather than waiting behind the change
// (CONTRACT.md fail.models-root).
func TestCatalogueReadDuringScan(t *testing.T) {
	rootA, rootB := t.TempDir(), t.TempDir()
	writeCheckpoint(t, rootA, "voice-a", "fixture", 1)
	writeCheckpoint(t, rootB, "voice-b", "fixture", 1)
	ts := newServer(t, func(c *Config) { c.ModelsRoot = rootA })
	hook := holdScans(ts, rootB)
	ts.serve()

	put := make(chan int, 1)
	go func() {
		st, err := putRoot(ts, context.Background(), rootB)
		if err != nil {
			t.Error(err)
		}
		put <- st
	}()
	<-hook.entered // the change is scanning, held at the hook

	for i := 0; i < 2; i++ { // the first read scans rootA, the second reads it
		r := ts.doCtx(ctxLimit(t), "GET", "/v1/catalogue", "")
		var c CatalogueList
		r.json(t, &c)
		if r.status != 200 || names(c) != "voice-a" || c.ModelsRoot != realPath(t, rootA) {
			t.Fatalf("read %d during the scan: %d %s", i, r.status, r.body)
		}
	}
	close(hook.release)
	if st := <-put; st != 200 {
		t.Fatalf("PUT: %d", st)
	}
	if c := ts.catalogue(); names(c) != "voice-b" {
		t.Fatalf("after the change: %+v", c)
	}
}

// A change of models root whose client goes away stops its scan and
// changes nothing.
func TestModelsRootScanStopsWithClient(t *testing.T) {
	rootA, rootB := t.TempDir(), t.TempDir()
	writeCheckpoint(t, rootA, "voice-a", "fixture", 1)
	writeCheckpoint(t, rootB, "voice-b", "fixture", 1)
	ts := newServer(t, func(c *Config) { c.ModelsRoot = rootA })
	hook := holdScans(ts, rootB)
	ts.serve()
	if c := ts.catalogue(); names(c) != "voice-a" {
		t.Fatalf("%+v", c)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := putRoot(ts, ctx, rootB)
		done <- err
	}()
	scanCtx := <-hook.entered
	cancel()
	<-scanCtx.Done() // the server saw the client leave: the scan's context ended
	if err := <-done; err == nil {
		t.Fatal("the cancelled PUT got an answer")
	}
	if c := ts.catalogue(); names(c) != "voice-a" || c.ModelsRoot != realPath(t, rootA) {
		t.Fatalf("a stopped scan changed the root: %+v", c)
	}
}
