// Command benchfirstdelta is the harness of `make bench-first-delta`:
// the time to the first transcript delta of a streamed transcription
// (POST /v1/audio/transcriptions with stream=true) against the whole
// request, over HTTP on loopback, for pocketsphinx (the default en-us
// checkpoint), whisper (the tiny synthetic model) and sherpa-onnx's
// streaming Zipformer2 transducer (synthetic; its segments end where the
// recognizer's endpoint fires), on this tree's
// server beside a baseline build of the same harness from another commit
// (-baseline, built by the make target), in the same run.
//
// Each server runs in its own child process (this binary or the baseline
// with -serve): a temporary models root with both models, one slot each.
// The upload is a paragraph of -sentences sentences spoken by flite's slt
// voice (a WAV file, about 2.5 s per sentence). For each engine the
// requests alternate between the two servers (-n each, the first server
// of each pair alternating), after one short request each (a model's
// first request loads it). Printed per engine and server: the p50 of
// the time to the first transcript.text.delta event, the p50 of the time
// to the end of the stream, their ratio, whether every request's deltas
// concatenated to its transcript.text.done text, and the baseline/this
// ratio of the first-delta p50.
//
// It then scores pocketsphinx's accuracy on both servers (non-streamed
// requests): the same paragraph spoken by flite's slt, awb, rms and kal16
// voices and jfk.wav, words matched against the text that was spoken
// (word-level edit distance after lower-casing and dropping punctuation),
// as errors / reference words per server.
//
// Size: -n 5 requests per engine and server and 10 sentences (about 25 s
// of audio per request): about 5 minutes on 2 busy cores. -engines picks
// the engines (ps, whisper, sherpa); the accuracy part runs with ps.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/engines"
	"github.com/sluice-dev/sluice/backends/flite"
	"github.com/sluice-dev/sluice/backends/sherpa"
	"github.com/sluice-dev/sluice/backends/whisper"
	"github.com/sluice-dev/sluice/backends/whisper/synth"
	"github.com/sluice-dev/sluice/server"
)

// paragraph is the text the uploads speak, one sentence after another.
var paragraph = []string{
	"Turn on the kitchen lights.", "Set a timer for ten minutes.", "Open the garage door.",
	"What is the weather like today?", "Call my sister at six o'clock.", "Play some jazz music in the living room.",
	"Remind me to buy milk tomorrow morning.", "How far is the nearest train station?",
	"Please close the window in the bedroom.", "Add eggs and bread to the shopping list.",
	"Turn off the television in the basement.", "Wake me up at seven thirty.",
}

// jfkText is what jfk.wav says.
const jfkText = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."

func main() {
	serve := flag.Bool("serve", false, "serve both models on loopback, print ADDR <address>, stop when stdin closes")
	baseline := flag.String("baseline", "", "the baseline build of this harness (make bench-first-delta builds it)")
	n := flag.Int("n", 5, "requests per engine and server")
	sentences := flag.Int("sentences", 10, "sentences in the upload (at most 12)")
	repeat := flag.Int("sherpa-repeat", 4, "sherpa's upload is the paragraph this many times (its endpoint fires every 20 s on the synthetic model)")
	list := flag.String("engines", "ps,whisper,sherpa", "the engines measured, comma-separated (ps, whisper, sherpa)")
	flag.Parse()
	var err error
	if *serve {
		err = serveModels()
	} else {
		err = run(*baseline, *n, min(max(*sentences, 1), len(paragraph)), strings.Split(*list, ","), max(*repeat, 1))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchfirstdelta:", err)
		os.Exit(1)
	}
}

// serveModels is a child: pocketsphinx as "ps", whisper as "whisper"
// and the synthetic streaming Zipformer2 as "sherpa" on 127.0.0.1, until
// stdin closes.
func serveModels() error {
	root, err := os.MkdirTemp("", "benchfirstdelta")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ps, err := catalogue.DefaultRecipe(catalogue.DefaultSources(""), catalogue.PocketsphinxEnUS)
	if err != nil {
		return fmt.Errorf("%w (make deps)", err)
	}
	wh, err := whisper.Recipe("whisper-tiny", synth.Tiny, whisper.Seed, catalogue.MaxSlots)
	if err != nil {
		return err
	}
	if _, err := catalogue.Build(root, []catalogue.Recipe{ps, wh}); err != nil {
		return err
	}
	if err := sherpa.BuildSynthetic(root, catalogue.DefaultSources(""), catalogue.MaxSlots, sherpa.StreamingSynthetic); err != nil {
		return fmt.Errorf("%w (make deps)", err)
	}
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
	go func() { _ = s.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	if err := s.RegisterModels(context.Background(), []server.ModelEntry{
		{ID: "ps", Spec: server.ModelSpec{Engine: "pocketsphinx", Task: "asr", Checkpoint: catalogue.PocketsphinxEnUS, Slots: json.RawMessage("1")}},
		{ID: "whisper", Spec: server.ModelSpec{Engine: whisper.Name, Task: "asr", Checkpoint: "whisper-tiny", Slots: json.RawMessage("1"),
			Options: json.RawMessage(`{"oversubscribe":true}`)}},
		{ID: "sherpa", Spec: server.ModelSpec{Engine: sherpa.Name, Task: "asr", Checkpoint: sherpa.StreamingSynthetic, Slots: json.RawMessage("1")}},
	}); err != nil {
		return err
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// child is a running server process.
type child struct {
	name string
	addr string
	cmd  *exec.Cmd
	in   io.Closer
}

func start(name, bin string) (*child, error) {
	cmd := exec.Command(bin, "-serve")
	cmd.Stderr = os.Stderr
	// The baseline's module root is a temporary copy without .deps: both
	// load this tree's whisper and sherpa-onnx libraries.
	cmd.Env = append(os.Environ(), "SLUICE_WHISPER_LIB="+whisper.LibraryPath(), "SLUICE_SHERPA_LIB="+sherpa.LibraryPath())
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		in.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s server did not start: %q %v", name, line, err)
	}
	return &child{name: name, addr: addr, cmd: cmd, in: in}, nil
}

func (c *child) stop() {
	c.in.Close()
	_ = c.cmd.Wait()
}

func run(baseline string, n, sentences int, models []string, repeat int) error {
	if baseline == "" {
		return errors.New("-baseline is required (make bench-first-delta builds it)")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	text := strings.Join(paragraph[:sentences], " ")
	long, err := speak("slt", text)
	if err != nil {
		return err
	}
	base, err := start("baseline", baseline)
	if err != nil {
		return err
	}
	defer base.stop()
	this, err := start("this", self)
	if err != nil {
		return err
	}
	defer this.stop()
	a, err := audio.ParseWAV(long)
	if err != nil {
		return err
	}
	fmt.Printf("upload: %d sentences, %.1f s (flite slt), stream=true, %d requests per engine and server, one slot each\n", sentences, a.Seconds(), n)
	// The synthetic streaming model never decodes silence as blanks, so
	// only the endpoint's utterance-length rule (20 s) ends its segments:
	// its upload is the paragraph repeat times.
	var pcm []int16
	for range repeat {
		pcm = append(pcm, a.Samples...)
	}
	longSherpa := audio.WAV(a.Rate, pcm)
	if slices.Contains(models, "sherpa") {
		fmt.Printf("sherpa's upload: the paragraph %d times, %.1f s\n", repeat, float64(len(pcm))/float64(a.Rate))
	}
	fmt.Printf("%-12s %-9s | %-16s | %-16s | %-11s | %s\n", "engine", "server", "first delta p50", "whole p50", "first/whole", "deltas = done")
	warm, err := speak("slt", paragraph[0])
	if err != nil {
		return err
	}
	for _, model := range models {
		// One short request each first: a model's first request loads it.
		for _, c := range []*child{base, this} {
			if _, _, _, err := streamed(c.addr, model, warm); err != nil {
				return fmt.Errorf("%s %s: %w", c.name, model, err)
			}
		}
		first := map[*child][]time.Duration{}
		whole := map[*child][]time.Duration{}
		exact := map[*child]bool{base: true, this: true}
		for i := range n {
			order := []*child{base, this}
			if i%2 == 1 {
				order = []*child{this, base}
			}
			for _, c := range order {
				up := long
				if model == "sherpa" {
					up = longSherpa
				}
				f, w, ok, err := streamed(c.addr, model, up)
				if err != nil {
					return fmt.Errorf("%s %s: %w", c.name, model, err)
				}
				first[c], whole[c] = append(first[c], f), append(whole[c], w)
				exact[c] = exact[c] && ok
			}
		}
		for _, c := range []*child{base, this} {
			f, w := p50(first[c]), p50(whole[c])
			fmt.Printf("%-12s %-9s | %13.1f ms | %13.1f ms | %11.2f | %v\n", model, c.name, ms(f), ms(w), float64(f)/float64(w), exact[c])
		}
		fmt.Printf("%-12s first-delta p50 baseline/this: %.2fx\n", model, float64(p50(first[base]))/float64(p50(first[this])))
	}
	if !slices.Contains(models, "ps") {
		return nil
	}
	return accuracy(base, this, text)
}

// streamed posts wav with stream=true and returns the time to the first
// delta event, to the end of the stream, and whether the deltas
// concatenated to the done event's text.
func streamed(addr, model string, wav []byte) (time.Duration, time.Duration, bool, error) {
	body, ctype := form(wav, model, true)
	t0 := time.Now()
	resp, err := http.Post("http://"+addr+"/v1/audio/transcriptions", ctype, body)
	if err != nil {
		return 0, 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return 0, 0, false, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var first time.Duration
	var deltas strings.Builder
	done, sawDone := "", false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct{ Type, Delta, Text string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return 0, 0, false, fmt.Errorf("event %q: %w", data, err)
		}
		switch ev.Type {
		case "transcript.text.delta":
			if first == 0 {
				first = time.Since(t0)
			}
			deltas.WriteString(ev.Delta)
		case "transcript.text.done":
			done, sawDone = ev.Text, true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, false, err
	}
	whole := time.Since(t0)
	if first == 0 {
		first = whole // no delta: the first text came with the end
	}
	return first, whole, sawDone && deltas.String() == done, nil
}

// form is a transcription request's multipart body and content type.
func form(wav []byte, model string, stream bool) (*bytes.Buffer, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	_ = mw.WriteField("model", model)
	if stream {
		_ = mw.WriteField("stream", "true")
	}
	fw, _ := mw.CreateFormFile("file", "speech.wav")
	_, _ = fw.Write(wav)
	mw.Close()
	return &b, mw.FormDataContentType()
}

// accuracy scores pocketsphinx's non-streamed transcripts on both servers.
func accuracy(base, this *child, text string) error {
	type sample struct {
		name, ref string
		wav       []byte
	}
	var set []sample
	for _, v := range []string{"slt", "awb", "rms", "kal16"} {
		wav, err := speak(v, text)
		if err != nil {
			return err
		}
		set = append(set, sample{"flite " + v, text, wav})
	}
	if jfk, err := os.ReadFile(catalogue.DefaultSources("").JFK()); err == nil {
		set = append(set, sample{"jfk.wav", jfkText, jfk})
	}
	fmt.Printf("\npocketsphinx accuracy, non-streamed (word errors / reference words)\n%-12s | %-14s | %-14s\n", "audio", "baseline", "this")
	var errs, words [2]int
	for _, s := range set {
		fmt.Printf("%-12s", s.name)
		for i, c := range []*child{base, this} {
			got, err := plain(c.addr, s.wav)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			e, w := wordErrors(s.ref, got)
			errs[i], words[i] = errs[i]+e, words[i]+w
			fmt.Printf(" | %4d / %-4d %3.0f%%", e, w, 100*float64(e)/float64(w))
		}
		fmt.Println()
	}
	fmt.Printf("%-12s | %4d / %-4d %3.0f%% | %4d / %-4d %3.0f%%\n", "all", errs[0], words[0], 100*float64(errs[0])/float64(words[0]),
		errs[1], words[1], 100*float64(errs[1])/float64(words[1]))
	return nil
}

// plain posts wav without streaming and returns the transcript.
func plain(addr string, wav []byte) (string, error) {
	body, ctype := form(wav, "ps", false)
	resp, err := http.Post("http://"+addr+"/v1/audio/transcriptions", ctype, body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("%d %s %v", resp.StatusCode, b, err)
	}
	var r struct{ Text string }
	return r.Text, json.Unmarshal(b, &r)
}

// wordErrors is the word-level edit distance between ref and hyp
// (lower-cased, punctuation but apostrophes dropped) and ref's length.
func wordErrors(ref, hyp string) (int, int) {
	norm := func(s string) []string {
		return strings.Fields(strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '\'':
				return r
			case r >= 'A' && r <= 'Z':
				return r + 'a' - 'A'
			}
			return ' '
		}, s))
	}
	r, h := norm(ref), norm(hyp)
	prev := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur := make([]int, len(h)+1)
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			sub := prev[j-1]
			if r[i-1] != h[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev = cur
	}
	return prev[len(h)], len(r)
}

// speak synthesises text with a flite voice as a WAV file.
func speak(voice, text string) ([]byte, error) {
	s, _, err := flite.New().Open(context.Background(), backends.Spec{Task: "tts", Checkpoint: voice, Slots: 1})
	if err != nil {
		return nil, fmt.Errorf("flite %s: %w (make deps)", voice, err)
	}
	defer s.Close(context.Background())
	in, _ := json.Marshal(audio.TTSRequest{Text: text})
	out, err := s.Infer(context.Background(), backends.Request{Input: in}, nil)
	return out.Data, err
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
