package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/server"
)

// measureHTTPCancel serves the bench model on one slot and, n times,
// disconnects a client whose 60 s clip whisper is decoding (its
// decode-start event) and at once sends a 2 s probe on the same model:
// the probe's answer time is the cancel-to-free-slot time plus the
// probe's own decode, which is measured alone beside it each time.
func measureHTTPCancel(label, root string, speech []int16, n int) error {
	cfg := server.DefaultConfig()
	cfg.ParallelJobs, cfg.ModelsRoot = true, root
	s, err := server.New(cfg, server.Options{Engines: engines.Registry(engines.Config{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	defer func() {
		_ = s.Shutdown(context.Background())
		<-served
	}()
	spec := server.ModelSpec{Engine: whisper.Name, Task: "asr", Checkpoint: "bench", Slots: []byte("1"),
		Options: []byte(`{"threads":1,"oversubscribe":true,"max_seconds":3600}`)}
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "asr", Spec: spec}}); err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/v1/audio/transcriptions"
	clip := func(seconds int) []byte {
		pcm := make([]int16, seconds*16000)
		for i := range pcm {
			pcm[i] = speech[i%len(speech)]
		}
		return audio.WAV(16000, pcm)
	}
	long, probe := clip(60), clip(2) // 1.5.0 skips audio of 1 s or less without decoding
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	post := func(ctx context.Context, wav []byte) error {
		body, ct := sluiceForm(wav)
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", ct)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	pr, pw, err := osPipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	defer pw.Close()
	defer whisper.NotifyDecodes(filepath.Join(root, "bench", whisper.ModelFile), pw)()
	var alone, after []time.Duration
	var b [1]byte
	for range n {
		t0 := time.Now()
		if err := post(context.Background(), probe); err != nil {
			return err
		}
		alone = append(alone, time.Since(t0))
		if _, err := pr.Read(b[:]); err != nil { // the probe's own decode event
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() { gone <- post(ctx, long) }()
		if _, err := pr.Read(b[:]); err != nil { // whisper decodes the long clip
			cancel()
			return err
		}
		t1 := time.Now()
		cancel()
		if err := post(context.Background(), probe); err != nil {
			return err
		}
		after = append(after, time.Since(t1))
		if _, err := pr.Read(b[:]); err != nil {
			return err
		}
		if err := <-gone; err == nil {
			return fmt.Errorf("the cancelled request was answered")
		}
	}
	slices.Sort(alone)
	slices.Sort(after)
	fmt.Printf("cancel over HTTP (1 slot, %s): disconnect to a 2 s probe's answer p50 %v (max %v); the probe alone p50 %v; over %d\n",
		label, after[n/2].Round(time.Millisecond), after[n-1].Round(time.Millisecond), alone[n/2].Round(time.Millisecond), n)
	return nil
}
