package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The requests the attacks send, and their answers.

// request is one HTTP request to build against a server.
type request func(ctx context.Context, url string) (*http.Request, error)

func jsonPost(path, body string) request {
	return func(ctx context.Context, url string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, strings.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}
}

// transcription is a multipart upload of data as file (a WAV) for model.
func transcription(model string, data []byte) request {
	return func(ctx context.Context, url string) (*http.Request, error) {
		var head bytes.Buffer
		mw := multipart.NewWriter(&head)
		_ = mw.WriteField("model", model)
		if _, err := mw.CreateFormFile("file", "a.wav"); err != nil {
			return nil, err
		}
		tail := "\r\n--" + mw.Boundary() + "--\r\n"
		body := io.MultiReader(bytes.NewReader(head.Bytes()), bytes.NewReader(data), strings.NewReader(tail))
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/audio/transcriptions", body)
		if err != nil {
			return nil, err
		}
		r.ContentLength = int64(head.Len() + len(data) + len(tail))
		r.Header.Set("Content-Type", mw.FormDataContentType())
		return r, nil
	}
}

// wav is a 16-bit mono WAV of size bytes (header included) at rate Hz: a
// 440 Hz tone at half scale.
func wav(rate, size int) []byte {
	n := (size - 44) / 2
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(rate*2))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*n))
	for i := range n {
		v := int16(16000 * math.Sin(2*math.Pi*440*float64(i)/float64(rate)))
		binary.LittleEndian.PutUint16(b[44+2*i:], uint16(v))
	}
	return b
}

var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// send runs one request to its answer's end within limit; it returns the
// status (0 on a transport failure) and the error.
func send(url string, rq request, limit time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	r, err := rq(ctx, url)
	if err != nil {
		return 0, err
	}
	res, err := client.Do(r)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

func statusText(code int, err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within cap"
	case err != nil && code == 0:
		return "transport error"
	}
	return strconv.Itoa(code)
}

// getJSON reads a JSON object from path within 5 s.
func getJSON(url, path string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(r)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	err = json.NewDecoder(res.Body).Decode(&m)
	return m, err
}

// awaitActive polls the model until it has at least one active slot:
// at most 400 polls, 25 ms apart (10 s).
func awaitActive(url, model string) error {
	for range 400 {
		m, err := getJSON(url, "/v1/models/"+model)
		if err == nil {
			if n, _ := m["active_slots"].(float64); n >= 1 {
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("model %s never had an active slot within 10 s", model)
}

func put(path, body string) request {
	return func(ctx context.Context, url string) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPut, url+path, strings.NewReader(body))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	}
}

func countText(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d×%s", m[k], k))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
