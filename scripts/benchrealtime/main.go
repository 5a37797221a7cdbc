// Command benchrealtime is the harness of `make bench-realtime`
// (CONTRACT.md "Live sessions"). In one process it serves pocketsphinx
// (the default en-us checkpoint, built from the Debian packages into a
// temporary models root) on loopback and measures, at each concurrency
// of -levels:
//
//	(a) live: that many WebSocket sessions on GET /v1/realtime, each
//	    streaming a flite-spoken sentence (about 2 s) in 20 ms appends at
//	    -pace times real time, then a commit; latency is from the commit
//	    (the end of speech: the turn's last audio was sent just before) to
//	    the completed transcript;
//	(b) file: the baseline, as many clients posting the same sentence as a
//	    WAV file to POST /v1/audio/transcriptions once the speech has
//	    ended; latency is the whole request.
//
// Both run -turns turns per client and level, (a) then (b). It prints
// p50 and p99 of both and their ratio, then the memory of open sessions:
// the Go heap and the process's RSS with -mem-sessions sessions open (each
// has transcribed one turn) beside the same process with none, per session.
// The clients run in the same process, so the per-session figures include
// the client's end of each connection (a few KiB). Size: 3 levels x 6
// turns at real time, about 2 minutes.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/server"
)

const sentence = "Turn on the kitchen lights."

func main() {
	levels := flag.String("levels", "1,2,4", "concurrent sessions, comma-separated")
	turns := flag.Int("turns", 6, "turns per client and level")
	pace := flag.Float64("pace", 1, "audio sent at this many times real time")
	memSessions := flag.Int("mem-sessions", 4, "sessions held open for the memory figures")
	flag.Parse()
	if err := run(*levels, *turns, *pace, *memSessions); err != nil {
		fmt.Fprintln(os.Stderr, "benchrealtime:", err)
		os.Exit(1)
	}
}

func run(levelList string, turns int, pace float64, memSessions int) error {
	var levels []int
	for _, f := range strings.Split(levelList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("bad level %q", f)
		}
		levels = append(levels, n)
	}
	slots := max(slices.Max(levels), memSessions)
	pcm24, wav, err := speech()
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "benchrealtime")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	r, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.PocketsphinxEnUS)
	if err != nil {
		return fmt.Errorf("%w (make deps)", err)
	}
	if _, err := catalogue.Build(root, []catalogue.Recipe{r}); err != nil {
		return err
	}
	cfg := server.DefaultConfig()
	cfg.ParallelJobs, cfg.ModelsRoot = true, root
	cfg.RealtimeMaxRate = 0
	s, err := server.New(cfg, server.Options{Engines: engines.Registry(engines.Config{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = s.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	rssBase := rss()
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{{ID: "asr", Spec: server.ModelSpec{Engine: "pocketsphinx", Task: "asr",
		Checkpoint: catalogue.PocketsphinxEnUS, Slots: json.RawMessage(strconv.Itoa(slots))}}}); err != nil {
		return err
	}
	addr := ln.Addr().String()
	fmt.Printf("pocketsphinx en-us, %d slots; sentence %.2f s of audio sent in 20 ms appends at %gx real time; %d turns per client\n",
		slots, float64(len(pcm24))/24000, pace, turns)
	fmt.Printf("decoders: %.1f MiB RSS per slot (loading %d slots)\n", float64(rss()-rssBase)/float64(slots)/(1<<20), slots)
	fmt.Printf("%-8s | %-28s | %-28s | %s\n", "sessions", "live: commit -> completed", "file: POST transcriptions", "p50 live/file")
	for _, c := range levels {
		live, err := parallel(c, turns, func() (func() (time.Duration, error), func(), error) { return liveClient(addr, pcm24, pace) })
		if err != nil {
			return fmt.Errorf("live at %d: %w", c, err)
		}
		file, err := parallel(c, turns, func() (func() (time.Duration, error), func(), error) { return fileClient(addr, wav, len(pcm24), pace) })
		if err != nil {
			return fmt.Errorf("file at %d: %w", c, err)
		}
		fmt.Printf("%-8d | p50 %7.1f ms  p99 %7.1f ms | p50 %7.1f ms  p99 %7.1f ms | %.2f\n", c,
			ms(pct(live, 50)), ms(pct(live, 99)), ms(pct(file, 50)), ms(pct(file, 99)), float64(pct(live, 50))/float64(pct(file, 50)))
	}
	return memory(addr, pcm24, memSessions)
}

// parallel runs c clients of turns turns each and returns every latency.
func parallel(c, turns int, newClient func() (func() (time.Duration, error), func(), error)) ([]time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, c)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn, done, err := newClient()
			if err != nil {
				errs <- err
				return
			}
			defer done()
			for range turns {
				d, err := turn()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return all, <-errs
}

// session is one open live session with a reader of its events.
type session struct {
	c         *websocket.Conn
	completed chan string
	failed    chan error
}

func dial(addr string) (*session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/v1/realtime?intent=transcription&model=asr", nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	s := &session{c: c, completed: make(chan string, 16), failed: make(chan error, 1)}
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				s.failed <- err
				return
			}
			var ev struct {
				Type       string          `json:"type"`
				Transcript string          `json:"transcript"`
				Error      json.RawMessage `json:"error"`
			}
			if json.Unmarshal(b, &ev) != nil {
				continue
			}
			switch ev.Type {
			case "conversation.item.input_audio_transcription.completed":
				s.completed <- ev.Transcript
			case "error":
				s.failed <- fmt.Errorf("error event %s", ev.Error)
				return
			}
		}
	}()
	return s, nil
}

// turn streams pcm at pace, commits and waits for the completed event.
func (s *session) turn(pcm []int16, pace float64) (time.Duration, error) {
	ctx := context.Background()
	step := time.Duration(float64(20*time.Millisecond) / pace)
	next := time.Now()
	for off := 0; off < len(pcm); off += 480 {
		b := audio.PCM16Bytes(pcm[off:min(off+480, len(pcm))])
		msg, _ := json.Marshal(map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(b)})
		if err := s.c.Write(ctx, websocket.MessageText, msg); err != nil {
			return 0, err
		}
		next = next.Add(step)
		time.Sleep(time.Until(next)) // the client's real-time pace
	}
	t0 := time.Now()
	if err := s.c.Write(ctx, websocket.MessageText, []byte(`{"type":"input_audio_buffer.commit"}`)); err != nil {
		return 0, err
	}
	select {
	case text := <-s.completed:
		if !strings.Contains(text, "kitchen") {
			return 0, fmt.Errorf("transcript %q", text)
		}
		return time.Since(t0), nil
	case err := <-s.failed:
		return 0, err
	}
}

func liveClient(addr string, pcm []int16, pace float64) (func() (time.Duration, error), func(), error) {
	s, err := dial(addr)
	if err != nil {
		return nil, nil, err
	}
	return func() (time.Duration, error) { return s.turn(pcm, pace) }, func() { _ = s.c.Close(websocket.StatusNormalClosure, "") }, nil
}

// fileClient waits as long as the speech lasts (at pace), then posts it.
func fileClient(addr string, wav []byte, samples24 int, pace float64) (func() (time.Duration, error), func(), error) {
	hc := &http.Client{Transport: &http.Transport{}}
	speech := time.Duration(float64(samples24) / 24000 / pace * float64(time.Second))
	return func() (time.Duration, error) {
			time.Sleep(speech) // the speech is spoken before a file client can send it
			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			fw, _ := mw.CreateFormFile("file", "speech.wav")
			_, _ = fw.Write(wav)
			_ = mw.WriteField("model", "asr")
			_ = mw.Close()
			t0 := time.Now()
			res, err := hc.Post("http://"+addr+"/v1/audio/transcriptions", mw.FormDataContentType(), &body)
			if err != nil {
				return 0, err
			}
			var out struct{ Text string }
			err = json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			if err != nil || !strings.Contains(out.Text, "kitchen") {
				return 0, fmt.Errorf("transcription %d %q: %v", res.StatusCode, out.Text, err)
			}
			return time.Since(t0), nil
		}, func() {
			hc.CloseIdleConnections()
		}, nil
}

// memory opens n sessions (each transcribes one turn, then stays open) and
// prints the heap and RSS per session beside the same process with none.
func memory(addr string, pcm []int16, n int) error {
	// One session first, so that what the first one allocates once for
	// the process (pools, the engine's shared state) is in the baseline.
	warm, err := dial(addr)
	if err != nil {
		return err
	}
	if _, err := warm.turn(pcm, 1000); err != nil {
		return err
	}
	_ = warm.c.Close(websocket.StatusNormalClosure, "")
	<-warm.failed // its reader saw the close
	heap0, rss0, g0 := heapLive(), rss(), runtime.NumGoroutine()
	var open []*session
	defer func() {
		for _, s := range open {
			_ = s.c.Close(websocket.StatusNormalClosure, "")
		}
	}()
	for range n {
		s, err := dial(addr)
		if err != nil {
			return err
		}
		open = append(open, s)
		if _, err := s.turn(pcm, 1000); err != nil {
			return err
		}
	}
	heap1, rss1, g1 := heapLive(), rss(), runtime.NumGoroutine()
	fmt.Printf("memory, %d sessions open (client ends included) beside none: live Go heap %.1f KiB -> %.1f KiB (%.1f KiB per session), RSS %.1f MiB -> %.1f MiB (%.1f KiB per session), goroutines %d -> %d\n",
		n, float64(heap0)/1024, float64(heap1)/1024, float64(heap1-heap0)/float64(n)/1024,
		float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rss1-rss0)/float64(n)/1024, g0, g1)
	return nil
}

// heapLive is the live heap after two collections.
func heapLive() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// rss is the process's resident set from /proc/self/status (0 elsewhere).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// speech synthesises the sentence with flite: 24 kHz PCM16 for the live
// sessions, the engine's own WAV for the file baseline.
func speech() ([]int16, []byte, error) {
	if err := flite.Available(); err != nil {
		return nil, nil, fmt.Errorf("%w (make deps)", err)
	}
	sess, _, err := flite.New().Open(context.Background(), backends.Spec{Task: "tts", Checkpoint: "slt", Slots: 1})
	if err != nil {
		return nil, nil, err
	}
	defer sess.Close(context.Background())
	in, _ := json.Marshal(audio.TTSRequest{Text: sentence})
	out, err := sess.Infer(context.Background(), backends.Request{Input: in}, nil)
	if err != nil {
		return nil, nil, err
	}
	a, err := audio.ParseWAV(out.Data)
	if err != nil {
		return nil, nil, err
	}
	if len(a.Samples) == 0 {
		return nil, nil, errors.New("flite spoke nothing")
	}
	return audio.Resample(a.Samples, a.Rate, 24000), out.Data, nil
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
