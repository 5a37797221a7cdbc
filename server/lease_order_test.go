package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// holdListener hands out connections that hold the server's goroutine in
// the write that completes a response (by its Content-Length), after the
// bytes went out, until the test lets it go: the client has the whole
// answer while the server has not yet returned from writing it, which a
// busy machine does now and then on its own.
type holdListener struct {
	net.Listener
	held chan chan struct{} // one per completed response, to be closed by the test
}

func (l *holdListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &holdConn{Conn: c, held: l.held}, nil
}

type holdConn struct {
	net.Conn
	held chan chan struct{}
	buf  []byte // the response so far
}

func (c *holdConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.buf = append(c.buf, p[:n]...)
	if err == nil && responseComplete(c.buf) {
		c.buf = nil
		release := make(chan struct{})
		c.held <- release
		<-release
	}
	return n, err
}

// responseComplete reports whether b holds a whole HTTP/1.1 response with a
// Content-Length.
func responseComplete(b []byte) bool {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return false
	}
	for _, line := range strings.Split(string(b[:end]), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return err == nil && len(b)-end-4 >= n
		}
	}
	return false
}

// One client alternating three models one request after another, under
// --max-loaded-models 1, on a new connection each time: each answer's
// lease is released before the client can have read the answer whole, so
// the next request never finds the only resident model still leased and
// is never refused 503 (CONTRACT.md phase.executing).
// The server's goroutine is held in the write that completes each answer
// until the client's next request was answered: with the lease released
// after that write, every request that must evict was refused.
func TestSequentialClientNeverFindsOwnLease(t *testing.T) {
	for _, tc := range []struct {
		name, put, path, ctype, body string
	}{
		{"infer", `{"engine":"fixture","slots":1}`, "/v1/models/%s/infer", "application/json", `{"input":1}`},
		{"task", `{"engine":"fixture","task":"vad","slots":1}`, "/v1/audio/voice-activity?model=%s", "audio/wav", "RIFF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newServer(t, func(c *Config) { c.MaxLoadedModels = 1 })
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hl := &holdListener{Listener: ln, held: make(chan chan struct{}, 1)}
			ts.addr = ln.Addr().String()
			ts.url = "http://" + ts.addr
			ts.served = make(chan error, 1)
			go func() { ts.served <- ts.s.Serve(hl) }()
			models := []string{"m0", "m1", "m2"}
			var mu sync.Mutex
			var prev chan struct{}
			releasePrev := func() {
				mu.Lock()
				defer mu.Unlock()
				if prev != nil {
					close(prev)
					prev = nil
				}
			}
			t.Cleanup(releasePrev)
			for _, m := range models { // each PUT loads m, evicting the one before
				go ts.put(m, tc.put)
				mu.Lock()
				prev = <-hl.held
				mu.Unlock()
				releasePrev()
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			const n = 60
			refused := 0
			for i := 0; i < n; i++ {
				m := models[i%len(models)]
				res, err := client.Post(ts.url+fmt.Sprintf(tc.path, m), tc.ctype, strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				h := <-hl.held // this answer's write, held
				releasePrev()  // the one before it may now return
				mu.Lock()
				prev = h
				mu.Unlock()
				switch {
				case res.StatusCode == http.StatusServiceUnavailable:
					refused++
				case res.StatusCode != 200:
					t.Fatalf("request %d on %s: %d %s", i, m, res.StatusCode, b)
				}
			}
			releasePrev()
			t.Logf("%d of %d requests refused 503", refused, n)
			if refused != 0 {
				t.Fatalf("%d of %d sequential requests were refused 503: a request found the previous one's lease", refused, n)
			}
		})
	}
}
