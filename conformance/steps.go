package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/backends/audio"
	"github.com/sluice-dev/sluice/backends/audio/av"
)

// put sends PUT /v1/models/{id} with the step's spec.
func (r *caseRun) put(a *PutStep) error {
	var body []byte
	if a.Raw != "" {
		s, err := r.expand(a.Raw)
		if err != nil {
			return err
		}
		body = []byte(s)
	} else {
		spec := map[string]any{"engine": "fixture", "task": "tts"}
		if a.Engine != nil {
			spec["engine"] = *a.Engine
		}
		if a.Task != nil {
			spec["task"] = *a.Task
		}
		if a.Checkpoint != nil {
			spec["checkpoint"] = *a.Checkpoint
		}
		if a.Slots.Kind != 0 {
			var v any
			if err := a.Slots.Decode(&v); err != nil {
				return fmt.Errorf("slots: %w", err)
			}
			spec["slots"] = v
		}
		if a.Options != nil {
			spec["options"] = r.mapOptions(a.Options)
		}
		if a.AdmissionTimeoutMS != nil {
			spec["admission_timeout_ms"] = *a.AdmissionTimeoutMS
		}
		if a.MaxQueue != nil {
			spec["max_queue"] = *a.MaxQueue
		}
		if a.Aliases != nil {
			names := make([]string, len(a.Aliases))
			for i, sym := range a.Aliases {
				names[i] = r.model(sym)
			}
			spec["aliases"] = names
		}
		var err error
		if body, err = json.Marshal(spec); err != nil {
			return err
		}
	}
	return r.send(request{method: "PUT", path: "/v1/models/" + r.model(a.Model), body: body}, a.Call, "")
}

// infer sends POST /v1/models/{id}/infer.
func (r *caseRun) infer(a *InferStep) error {
	in := map[string]any{}
	if a.Input != nil {
		in = r.mapInput(a.Input)
	}
	req := map[string]any{"input": in}
	if a.Stream {
		req["stream"] = true
	}
	if a.Timeout != nil {
		req["admission_timeout_ms"] = *a.Timeout
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	rq := request{method: "POST", path: "/v1/models/" + r.model(a.Model) + "/infer", body: b}
	if a.HeaderTimeout != nil {
		rq.header = map[string][]string{"Sluice-Admission-Timeout-Ms": {*a.HeaderTimeout}}
	}
	return r.send(rq, a.Call, "")
}

// httpRequest builds a raw step's request.
func (r *caseRun) httpRequest(a *HTTPStep) (request, error) {
	p, err := r.expand(a.Path)
	if err != nil {
		return request{}, err
	}
	rq := request{method: strings.ToUpper(a.Method), path: p, header: map[string][]string{}, chunked: a.Chunked,
		first: a.SendFirst, pause: time.Duration(a.PauseMS) * time.Millisecond}
	for k, vs := range a.Headers {
		rq.header[k] = vs
	}
	if rq.method == "" {
		rq.method = "GET"
	}
	switch {
	case a.Body != "":
		s, err := r.expand(a.Body)
		if err != nil {
			return request{}, err
		}
		rq.body = []byte(s)
	case a.JSON != nil:
		b, err := json.Marshal(r.mapValue(a.JSON))
		if err != nil {
			return request{}, err
		}
		rq.body = b
	case a.Audio != nil:
		b, err := a.Audio.bytes()
		if err != nil {
			return request{}, err
		}
		rq.body = b
	}
	return rq, nil
}

// containerBodies are the AudioBody formats FFmpeg writes (Rate 0: the
// body's own rate).
var containerBodies = map[string]av.EncodeOptions{
	"webm": {Muxer: "webm", Encoder: "libopus", Rate: 48000, Streamable: true},
	"m4a":  {Muxer: "ipod", Encoder: "aac"},
}

// bytes generates the body an AudioBody describes.
func (a *AudioBody) bytes() ([]byte, error) {
	if a.Rate < 1 || a.Seconds < 0 || a.Seconds > 600 || a.StatedSeconds < 0 {
		return nil, fmt.Errorf("audio body: rate %d, seconds %v: want a positive rate and 0..600 s", a.Rate, a.Seconds)
	}
	s := make([]int16, int(float64(a.Rate)*a.Seconds))
	for i := range s {
		s[i] = int16(8000 * math.Sin(2*math.Pi*300*float64(i)/float64(a.Rate)))
	}
	if a.Tensor != "" {
		return v2AudioBody(a.Tensor, a.Rate, s)
	}
	if a.Format != "" && a.Format != "wav" {
		if a.Raw || a.StatedSeconds > 0 {
			return nil, fmt.Errorf("audio body: format %q takes neither raw nor stated_seconds", a.Format)
		}
		if o, ok := containerBodies[a.Format]; ok {
			// What browsers (WebM/Opus at 48 kHz, no duration) and phones
			// (M4A/AAC) record, written by FFmpeg (backends/audio/av).
			if o.Rate == 0 {
				o.Rate = a.Rate
			}
			o.Limit = 1 << 26
			b, err := av.Encode(context.Background(), o, audio.Resample(s, a.Rate, o.Rate))
			if err != nil {
				return nil, fmt.Errorf("audio body: %w", err)
			}
			return b, nil
		}
		b, _, _, err := audio.Encode(context.Background(), a.Format, a.Rate, s)
		if err != nil {
			return nil, fmt.Errorf("audio body: %w", err)
		}
		return b, nil
	}
	pcm := audio.PCM16Bytes(s)
	if a.Raw {
		return pcm, nil
	}
	w := audio.WAV(a.Rate, s)
	if a.StatedSeconds > 0 {
		stated := 2 * int64(float64(a.Rate)*a.StatedSeconds)
		if stated > 0xFFFFF000-1 {
			return nil, fmt.Errorf("audio body: stated_seconds %v does not fit a WAV header", a.StatedSeconds)
		}
		binary.LittleEndian.PutUint32(w[40:], uint32(stated)) // the data chunk's size
		binary.LittleEndian.PutUint32(w[4:], uint32(36+stated))
	}
	return w, nil
}

func (r *caseRun) raw(a *HTTPStep) error {
	rq, err := r.httpRequest(a)
	if err != nil {
		return err
	}
	if a.Jar == "" {
		return r.send(rq, a.Call, a.Via)
	}
	// A jar's step: its cookies go out, the answer's come back into it.
	jar := r.jars[a.Jar]
	if jar == nil {
		jar = map[string]string{}
		r.jars[a.Jar] = jar
	}
	var cs []string
	for _, k := range slices.Sorted(maps.Keys(jar)) {
		cs = append(cs, (&http.Cookie{Name: k, Value: jar[k]}).String())
	}
	if len(cs) > 0 {
		rq.header["Cookie"] = []string{strings.Join(cs, "; ")}
	}
	var ans answer
	if a.Via == "handler" && !r.viaHandler() {
		if r.inst == nil || r.inst.Handler() == nil {
			return errors.New("via handler needs the case's own in-process server")
		}
		ctx, cancel := r.bounded()
		ans = exchangeHandler(ctx, r.inst.Handler(), rq)
		cancel()
	} else {
		ans = r.do(rq)
	}
	for _, c := range (&http.Response{Header: ans.header}).Cookies() {
		if a.KeepJar {
			break
		}
		if c.MaxAge < 0 || c.Value == "" {
			delete(jar, c.Name)
		} else {
			jar[c.Name] = c.Value
		}
	}
	return r.check(&ans, a.Expect)
}

// stall opens a stalled connection; the step ends when the stall has
// begun (for "idle", once its keep-alive answers were read), within the
// step timeout.
func (r *caseRun) stall(a *StallStep) error {
	var path string
	var body []byte
	if a.Model != "" {
		path = "/v1/models/" + r.model(a.Model) + "/infer"
		in := map[string]any{}
		if a.Input != nil {
			in = r.mapInput(a.Input)
		}
		body, _ = json.Marshal(map[string]any{"input": in, "stream": true})
	}
	ctx, cancel := context.WithCancel(r.ctx)
	cl := &call{name: a.As, cancel: cancel, done: make(chan struct{}), awaited: a.Kind == "unread"}
	if a.As != "" {
		r.calls[a.As] = cl
		r.order = append(r.order, a.As)
	}
	started := make(chan error, 1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(cl.done)
		cl.ans = stallExchange(ctx, r.base, a.Kind, path, body, started)
	}()
	t := time.NewTimer(r.stepTimeout)
	defer t.Stop()
	select {
	case err := <-started:
		return err
	case <-t.C:
		cancel() // closes the connection: the exchange ends
		return fmt.Errorf("stall %s did not begin within %s", a.Kind, r.stepTimeout)
	}
}

// open opens a gate.
func (r *caseRun) open(g string) error {
	a := r.do(request{method: "POST", path: "/v1/fixture/gates/" + r.gate(g) + "/open"})
	return r.check(&a, nil)
}

type gateList struct {
	Gates []struct {
		Name    string `json:"name"`
		Open    bool   `json:"open"`
		Waiting int    `json:"waiting"`
	} `json:"gates"`
}

// awaitGate waits until exactly n steps wait at a gate.
func (r *caseRun) awaitGate(a *GateStep) error {
	want := 1
	if a.Waiting != nil {
		want = *a.Waiting
	}
	name := r.gate(a.Gate)
	return r.waitFor(fmt.Sprintf("%d waiting at gate %s", want, a.Gate), func() (bool, string, error) {
		ans := r.do(request{method: "GET", path: "/v1/fixture/gates"})
		if err := r.check(&ans, nil); err != nil {
			return false, "", err
		}
		var gl gateList
		if err := json.Unmarshal(ans.body, &gl); err != nil {
			return false, "", fmt.Errorf("gate list: %w", err)
		}
		n := 0
		for _, g := range gl.Gates {
			if g.Name == name {
				n = g.Waiting
			}
		}
		return n == want, fmt.Sprintf("%d waiting", n), nil
	})
}

// getModel reads GET /v1/models/{id} as a JSON object.
func (r *caseRun) getModel(sym string) (map[string]any, answer, error) {
	a := r.do(request{method: "GET", path: "/v1/models/" + r.model(sym)})
	if a.err != nil {
		return nil, a, a.err
	}
	if a.status != 200 {
		return nil, a, nil
	}
	m, ok := decodeJSON(a.body).(map[string]any)
	if !ok {
		return nil, a, fmt.Errorf("model object is not a JSON object: %s", a.body)
	}
	return m, a, nil
}

// modelDiff compares a model object with an expectation; "" means equal.
func (r *caseRun) modelDiff(want ModelExpect, got map[string]any) (string, error) {
	var diffs []string
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w := want[k]
		if k == "model" || k == "within_ms" {
			continue
		}
		if !modelFields[k] {
			return "", fmt.Errorf("unknown model field %q", k)
		}
		g, ok := got[k]
		wv := r.mapValue(w)
		if !ok || !equalJSON(wv, g) {
			diffs = append(diffs, fmt.Sprintf("%s=%s (want %s)", k, jsonText(g), jsonText(wv)))
		}
	}
	return strings.Join(diffs, ", "), nil
}

var modelFields = map[string]bool{"state": true, "loaded": true, "slots": true, "active_slots": true,
	"queued_requests": true, "queued_managers": true, "max_parallel_slots": true, "config_version": true,
	"task": true, "engine": true, "id": true, "object": true, "load_failures": true, "backing_off": true}

func (r *caseRun) expectModel(want ModelExpect) error {
	sym, _ := want["model"].(string)
	m, a, err := r.getModel(sym)
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("GET model %s: %s", sym, a.summary())
	}
	d, err := r.modelDiff(want, m)
	if err != nil {
		return err
	}
	if d != "" {
		return fmt.Errorf("model %s: %s", sym, d)
	}
	return nil
}

// awaitModel polls a model until it matches. A within_ms key bounds the
// time from the start of the step (right after the step that caused the
// change, such as a disconnect) to the first matching read.
func (r *caseRun) awaitModel(want ModelExpect) error {
	sym, _ := want["model"].(string)
	start := time.Now()
	err := r.waitFor(fmt.Sprintf("model %s to show %s", sym, jsonText(map[string]any(want))), func() (bool, string, error) {
		m, a, err := r.getModel(sym)
		if err != nil {
			return false, "", err
		}
		if m == nil {
			return false, a.summary(), nil
		}
		d, err := r.modelDiff(want, m)
		return d == "", d, err
	})
	if err != nil {
		return err
	}
	if ms, ok := want["within_ms"].(int); ok {
		took := time.Since(start)
		if limit := time.Duration(float64(ms)*r.slack) * time.Millisecond; took > limit {
			return fmt.Errorf("model %s matched after %s, want within %dms (slack %.1f)", sym, took.Round(time.Millisecond), ms, r.slack)
		}
	}
	return nil
}

// absent checks that an ID is unknown: 404 on GET and not listed.
func (r *caseRun) absent(sym string) error {
	a := r.do(request{method: "GET", path: "/v1/models/" + r.model(sym)})
	if err := r.check(&a, &Expect{Status: 404, Error: "not_found_error"}); err != nil {
		return err
	}
	return r.list(&ListStep{Absent: []string{sym}})
}

// list checks GET /v1/models.
func (r *caseRun) list(l *ListStep) error {
	a := r.do(request{method: "GET", path: "/v1/models"})
	if err := r.check(&a, nil); err != nil {
		return err
	}
	var ml struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &ml); err != nil || ml.Object != "list" {
		return fmt.Errorf("model list %s: %v", a.body, err)
	}
	pos := map[string]int{}
	for i, m := range ml.Data {
		if id, ok := m["id"].(string); ok {
			pos[id] = i
		}
	}
	last := -1
	for _, s := range l.Has {
		p, ok := pos[r.model(s)]
		if !ok {
			return fmt.Errorf("model %s not listed", s)
		}
		if p < last {
			return fmt.Errorf("model %s listed out of registration order", s)
		}
		last = p
	}
	for _, s := range l.Absent {
		if _, ok := pos[r.model(s)]; ok {
			return fmt.Errorf("model %s listed, want absent", s)
		}
	}
	return nil
}

// pending checks that calls have not answered yet.
func (r *caseRun) pending(names []string) error {
	for _, n := range names {
		c, err := r.callNamed(n)
		if err != nil {
			return err
		}
		if c.finished() {
			return fmt.Errorf("call %s must still be pending, but it answered: %s", n, c.ans.summary())
		}
	}
	return nil
}

// await waits for a call's answer and checks it.
func (r *caseRun) await(a *AwaitStep) error {
	c, err := r.callNamed(a.Call)
	if err != nil {
		return err
	}
	c.awaited = true
	t := time.NewTimer(r.stepTimeout)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		return fmt.Errorf("call %s did not answer within %s", a.Call, r.stepTimeout)
	}
	e := a.Expect
	return r.check(&c.ans, &e)
}

// awaitChunks waits until a stream has received n data events.
func (r *caseRun) awaitChunks(a *ChunkStep) error {
	c, err := r.callNamed(a.Call)
	if err != nil {
		return err
	}
	return r.waitFor(fmt.Sprintf("%d chunks on %s", a.N, a.Call), func() (bool, string, error) {
		n := c.chunks.Load()
		if c.finished() && n < int64(a.N) {
			return false, "", fmt.Errorf("stream %s ended after %d chunks: %s", a.Call, n, c.ans.summary())
		}
		return n >= int64(a.N), fmt.Sprintf("%d chunks", n), nil
	})
}

// disconnect makes the client of a pending call go away.
func (r *caseRun) disconnect(name string) error {
	c, err := r.callNamed(name)
	if err != nil {
		return err
	}
	if c.finished() {
		return fmt.Errorf("call %s answered before its disconnect: %s", name, c.ans.summary())
	}
	c.cancel()
	return nil
}

// exited waits for the case's server to exit and checks when and how.
func (r *caseRun) exited(a *ExitStep) error {
	limit := r.stepTimeout
	if a.MaxMS > 0 {
		limit = max(limit, time.Duration(float64(a.MaxMS)*r.slack)*time.Millisecond+time.Second)
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.inst.Done():
	case <-t.C:
		return fmt.Errorf("server did not exit within %s", limit)
	}
	began := r.inst.ShutdownBegan()
	took := time.Since(began)
	if a.MinMS > 0 && took < time.Duration(a.MinMS)*time.Millisecond {
		return fmt.Errorf("server exited %s after the shutdown began, before the %dms it must wait", took.Round(time.Millisecond), a.MinMS)
	}
	if a.MaxMS > 0 && took > time.Duration(float64(a.MaxMS)*r.slack)*time.Millisecond {
		return fmt.Errorf("server exited %s after the shutdown began, later than %dms (slack %.1f)", took.Round(time.Millisecond), a.MaxMS, r.slack)
	}
	if a.Error != nil && (r.inst.ExitErr() != nil) != *a.Error {
		return fmt.Errorf("exit error %v, want error=%v", r.inst.ExitErr(), *a.Error)
	}
	return nil
}

// logCheck counts a text in the case's server's log. Positive checks wait
// for the line (a process logs asynchronously); absence is checked now.
func (r *caseRun) logCheck(a *LogStep) error {
	text, err := r.expand(a.Contains) // model symbols and $DIR
	if err != nil {
		return err
	}
	count := func() int { return strings.Count(r.inst.Logs(), text) }
	switch {
	case a.Absent:
		if n := count(); n > 0 {
			return fmt.Errorf("log contains %q %d times, want none", a.Contains, n)
		}
		return nil
	case a.Count != nil:
		if err := r.waitFor(fmt.Sprintf("%d log lines with %q", *a.Count, a.Contains), func() (bool, string, error) {
			n := count()
			return n >= *a.Count, fmt.Sprintf("%d", n), nil
		}); err != nil {
			return err
		}
		if n := count(); n != *a.Count {
			return fmt.Errorf("log contains %q %d times, want %d", a.Contains, n, *a.Count)
		}
		return nil
	}
	return r.waitFor(fmt.Sprintf("a log line with %q", a.Contains), func() (bool, string, error) {
		return count() > 0, "none", nil
	})
}

// refused checks that a new connection is refused (the listener closed).
func (r *caseRun) refused() error {
	u, err := url.Parse(r.base)
	if err != nil {
		return err
	}
	return r.waitFor("the listener to refuse connections", func() (bool, string, error) {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err != nil {
			return true, "", nil
		}
		_ = c.Close()
		return false, "connection accepted", nil
	})
}

// sessions checks the in-process fixture's open sessions (binary: skipped).
func (r *caseRun) sessions(n int) error {
	got, ok := r.inst.OpenSessions()
	if !ok {
		return nil
	}
	if got != n {
		return fmt.Errorf("%d fixture sessions open, want %d", got, n)
	}
	return nil
}
