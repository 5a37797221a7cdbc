// Command reliability is `make reliability` ("The serving edge survives
// hostile clients, crashes and restarts"): the attacks
// against a built `sluice` binary, one table of figures, each beside the
// same figure of a baseline binary from the same run (-baseline).
//
// Every figure starts its own server process (so peak RSS is that of one
// attack), `serve --parallel-jobs --ui-management --fixture --models-root
// DIR --listen 127.0.0.1:0` like `make run`, on loopback only, and kills it
// at the end. Every wait is capped; a cap that passes prints "> CAP".
//
//	(a) CPU seconds (utime+stime from /proc/PID/stat, the delta around the
//	    request) and peak RSS (VmHWM from /proc/PID/status after it) of one
//	    transcription of a 256 KiB and of a 1 MiB 16-bit mono WAV at
//	    1009 Hz (model asr, pocketsphinx), and of one /v1/audio/speech
//	    request with "sample_rate": 383999 (model tts, flite).
//	(b) Seconds until a stalled stream's slot frees: a fixture stream of
//	    10,000 chunks on a one-slot model whose client never reads (its
//	    receive buffer set to 4 KiB), then an unload of that model and a
//	    request behind it: the time until that request is answered.
//	(c) Peak RSS with 20 concurrent 24 MiB WAV uploads to
//	    /v1/audio/transcriptions: at 16 kHz (c1: 786 s, over max_seconds,
//	    refused) and at 44.1 kHz (c2: 285 s, decoded and transcribed).
//	(d) /healthz's answer time with 1,100 slow connections open (each sent
//	    a request header and then one body byte per second) while the
//	    server runs under `prlimit --nofile=1024:1024`.
//	(e) Exit time after SIGTERM with --shutdown-timeout 5s: (e1) during a
//	    fixture request that ignores its context (input stuck, held at a
//	    gate; a binary without stuck cancels it at the deadline), (e2)
//	    during an amplified transcription (300 s of audio, pocketsphinx's
//	    max_seconds, at 1009 Hz).
//
// Size and duration: about 8 server starts per binary; the attacks send
// about 500 MiB over loopback per binary and take 1 to 4 minutes per binary
// (longest when a stalled stream or a stuck exit hits its cap). It needs the
// default models root (`make models`) and the real engines' libraries.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

func main() {
	bin := flag.String("binary", "", "sluice binary to attack (default: build ./cmd/sluice)")
	base := flag.String("baseline", "", "baseline sluice binary, measured in the same run beside -binary")
	root := flag.String("models-root", "models", "models root (make models)")
	only := flag.String("only", "", "run only the figures whose key starts with this (a, b, c, d, e)")
	flag.Parse()
	if err := run(*bin, *base, *root, *only); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
}

// figure is one row: a key, what it measures, and a measurement per binary.
type figure struct {
	key, what string
	measure   func(h *harness) string
}

func run(bin, base, root, only string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "pocketsphinx-en-us")); err != nil {
		return fmt.Errorf("models root %s lacks pocketsphinx-en-us (make models): %w", root, err)
	}
	if bin == "" {
		dir, err := os.MkdirTemp("", "sluice-reliability-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/sluice").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/sluice: %w\n%s", err, out)
		}
	}
	raiseNoFile()
	bins := []string{bin}
	if base != "" {
		bins = append(bins, base)
	}
	hs := make([]*harness, len(bins))
	for i, b := range bins {
		hs[i] = &harness{bin: b, root: root}
	}
	var rows [][]string
	for _, f := range figures() {
		if !strings.HasPrefix(f.key, only) {
			continue
		}
		row := []string{f.key, f.what}
		for _, h := range hs {
			fmt.Fprintf(os.Stderr, "reliability: %s %s ...\n", f.key, h.bin)
			row = append(row, f.measure(h))
		}
		rows = append(rows, row)
	}
	fmt.Println("binary:  ", bin)
	if base != "" {
		fmt.Println("baseline:", base)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	head := "fig\twhat\tbinary"
	if base != "" {
		head += "\tbaseline"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func figures() []figure {
	return []figure{
		{"a1", "transcription, 256 KiB WAV @1009 Hz: CPU s, peak RSS MiB [status]", func(h *harness) string {
			return h.oneRequest(transcription("asr", wav(1009, 256<<10)))
		}},
		{"a2", "transcription, 1 MiB WAV @1009 Hz: CPU s, peak RSS MiB [status]", func(h *harness) string {
			return h.oneRequest(transcription("asr", wav(1009, 1<<20)))
		}},
		{"a3", "speech, sample_rate 383999: CPU s, peak RSS MiB [status]", func(h *harness) string {
			return h.oneRequest(jsonPost("/v1/audio/speech", `{"model":"tts","input":"Open the garage door.","sample_rate":383999}`))
		}},
		{"b", "stalled stream, then unload + request behind it: s until answered", (*harness).stalledStream},
		{"c1", "20 concurrent 24 MiB WAV uploads @16 kHz (786 s, over max_seconds): peak RSS MiB [statuses]", func(h *harness) string {
			return h.bigUploads(16000)
		}},
		{"c2", "20 concurrent 24 MiB WAV uploads @44.1 kHz (285 s, decoded): peak RSS MiB [statuses]", func(h *harness) string {
			return h.bigUploads(44100)
		}},
		{"d", "1,100 slow connections, nofile 1024: /healthz answer", (*harness).slowConns},
		{"e1", "SIGTERM, --shutdown-timeout 5s, stuck fixture call: exit s [status]", func(h *harness) string {
			return h.stuckExit(false)
		}},
		{"e2", "SIGTERM, --shutdown-timeout 5s, 300 s WAV @1009 Hz transcribing: exit s [status]", func(h *harness) string {
			return h.stuckExit(true)
		}},
	}
}
