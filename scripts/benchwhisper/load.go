package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/whisper"
)

// sample is what one or more runs of a target measured.
type sample struct {
	shorts, longs []float64 // seconds
	wall, cpu     time.Duration
	n             int // requests
}

func (s *sample) add(o sample) {
	s.shorts, s.longs = append(s.shorts, o.shorts...), append(s.longs, o.longs...)
	s.wall, s.cpu, s.n = s.wall+o.wall, s.cpu+o.cpu, s.n+o.n
}

func (s *sample) rps() float64 { return float64(s.n) / s.wall.Seconds() }

// form builds one target's multipart request for a clip.
type form func(wav []byte) (body []byte, contentType string)

func multipartForm(wav []byte, fields ...string) ([]byte, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "clip.wav")
	_, _ = fw.Write(wav)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// peerForm asks whisper.cpp's server for greedy decoding without
// temperature fallback, as Sluice decodes. Its 1.5.0 ignores -nf and sets
// temperature_inc from the field "temperature" only when a field
// "temerature" (sic) is present, else 0.2: both are sent.
func peerForm(wav []byte) ([]byte, string) {
	return multipartForm(wav, "response-format", "json", "temerature", "0", "temperature", "0")
}

func sluiceForm(wav []byte) ([]byte, string) {
	return multipartForm(wav, "model", "asr", "language", "en", "response_format", "json")
}

// drive sends every job once, clients at a time in job order, and times
// each from its send to its whole answer.
func drive(name, url string, f form, jobs []job, clients int) (sample, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Minute}
	defer client.CloseIdleConnections()
	queue := make(chan int, len(jobs))
	for i := range jobs {
		queue <- i
	}
	close(queue)
	lat := make([]time.Duration, len(jobs))
	errs := make([]error, clients)
	start := time.Now()
	var wg sync.WaitGroup
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				body, ctype := f(jobs[i].wav)
				t0 := time.Now()
				resp, err := client.Post(url, ctype, bytes.NewReader(body))
				if err != nil {
					errs[k] = err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !json.Valid(b) {
					errs[k] = fmt.Errorf("%s: %d %.200s", name, resp.StatusCode, b)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return sample{}, err
	}
	var shorts, longs []float64
	for i, j := range jobs {
		if j.long {
			longs = append(longs, lat[i].Seconds())
		} else {
			shorts = append(shorts, lat[i].Seconds())
		}
	}
	return sample{shorts: shorts, longs: longs, wall: wall, n: len(jobs)}, nil
}

// pct is the nearest-rank percentile of xs (0 when empty).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(len(s)-1, i))]
}

// cancelOnce opens the checkpoint at dir with one slot, starts a 60 s
// decode, cancels it at whisper's decode-start event and returns the time
// from the cancel to Infer's return.
func cancelOnce(dir string, speech []int16) (time.Duration, error) {
	ctx := context.Background()
	spec := backends.Spec{Model: "bench", Task: "asr", Engine: whisper.Name, Checkpoint: dir, Options: []byte(`{"oversubscribe":true}`), Slots: 1}
	s, _, err := whisper.New().Open(ctx, spec)
	if err != nil {
		return 0, err
	}
	defer s.Close(ctx)
	pr, pw, err := osPipe()
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	defer pw.Close()
	defer whisper.NotifyDecodes(dir+"/"+whisper.ModelFile, pw)()
	pcm := make([]int16, 60*16000)
	for i := range pcm {
		pcm[i] = speech[i%len(speech)]
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Infer(rctx, backends.Request{Data: le16(pcm), Input: []byte(`{"sample_rate":16000,"language":"en"}`)}, nil)
		done <- err
	}()
	var b [1]byte
	if _, err := pr.Read(b[:]); err != nil {
		return 0, err
	}
	t0 := time.Now()
	cancel()
	err = <-done
	d := time.Since(t0)
	if !errors.Is(err, context.Canceled) {
		return 0, fmt.Errorf("cancelled decode returned %v", err)
	}
	return d, nil
}
