package conformance

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// Live-session steps (CONTRACT.md "Live sessions"): a WebSocket client of
// GET /v1/realtime?intent=transcription.
//
//	realtime: {model: M, as: S, timeout_ms, expect, query, headers, created}
//	    open session S on M (default: the upgrade and
//	    transcription_session.created must come; an expect with another
//	    status checks the refusal before the upgrade like an http answer);
//	    query replaces the URL's query (intent=transcription&model=M;
//	    $SYM expanded, '' for none), headers are sent with the handshake,
//	    created is the first event's type when not the beta's
//	live_send: {session: S, audio_ms: N, events: [...], commit: true}
//	    send N ms of a 300 Hz tone (pcm16, 24 kHz) in 20 ms appends, then
//	    raw client events, then a commit
//	live_expect: {session: S, events: [type, ...], close: CODE}  read
//	    until those server event types have come in that order (others may
//	    come between); with close, the socket must then close with CODE
//	live_close: S  the client closes S (1000)

// RealtimeStep opens a live session.
type RealtimeStep struct {
	Model     string            `yaml:"model"`
	As        string            `yaml:"as"`
	TimeoutMS *int64            `yaml:"timeout_ms"`
	Expect    *Expect           `yaml:"expect"`
	Query     *string           `yaml:"query"`
	Headers   map[string]string `yaml:"headers"`
	Created   string            `yaml:"created"`
}

// LiveSendStep sends client events to a session.
type LiveSendStep struct {
	Session string           `yaml:"session"`
	Events  []map[string]any `yaml:"events"`
	AudioMS int              `yaml:"audio_ms"`
	Commit  bool             `yaml:"commit"`
}

// LiveExpectStep reads a session's server events.
type LiveExpectStep struct {
	Session string   `yaml:"session"`
	Events  []string `yaml:"events"`
	Close   int      `yaml:"close"`
}

func init() {
	stepKinds["realtime"] = func() any { return new(RealtimeStep) }
	stepKinds["live_send"] = func() any { return new(LiveSendStep) }
	stepKinds["live_expect"] = func() any { return new(LiveExpectStep) }
	stepKinds["live_close"] = func() any { return new(liveClose) }
}

// liveClose is live_close's argument (its own type, so the step switch
// tells it from the other string steps).
type liveClose string

func (r *caseRun) liveStep(st Step) (bool, error) {
	switch a := st.Arg.(type) {
	case *RealtimeStep:
		return true, r.realtime(a)
	case *LiveSendStep:
		return true, r.liveSend(a)
	case *LiveExpectStep:
		return true, r.liveExpect(a)
	case *liveClose:
		c, err := r.liveConn(string(*a))
		if err != nil {
			return true, err
		}
		ctx, cancel := r.bounded()
		defer cancel()
		go func() { <-ctx.Done(); _ = c.CloseNow() }() // Close waits for the server's reply at most this long
		if err := c.Close(websocket.StatusNormalClosure, ""); err != nil && !errors.As(err, new(websocket.CloseError)) {
			return true, fmt.Errorf("closing %s: %w", *a, err)
		}
		return true, nil
	}
	return false, nil
}

func (r *caseRun) liveConn(name string) (*websocket.Conn, error) {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	c, ok := r.live[name]
	if !ok {
		return nil, fmt.Errorf("no live session %q", name)
	}
	return c, nil
}

func (r *caseRun) realtime(a *RealtimeStep) error {
	if r.viaHandler() {
		return errors.New("a live session needs the server's listener")
	}
	h := http.Header{}
	if a.TimeoutMS != nil {
		h.Set("Sluice-Admission-Timeout-Ms", strconv.FormatInt(*a.TimeoutMS, 10))
	}
	for k, v := range a.Headers {
		h.Set(k, v)
	}
	url := "ws" + strings.TrimPrefix(r.base, "http") + "/v1/realtime?intent=transcription&model=" + r.model(a.Model)
	if a.Query != nil {
		q, err := r.expand(*a.Query)
		if err != nil {
			return err
		}
		url = strings.TrimSuffix("ws"+strings.TrimPrefix(r.base, "http")+"/v1/realtime?"+q, "?")
	}
	ctx, cancel := r.bounded()
	defer cancel()
	c, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: r.client, HTTPHeader: h})
	if a.Expect != nil && a.Expect.Status != 0 && a.Expect.Status != http.StatusSwitchingProtocols {
		if err == nil {
			_ = c.CloseNow()
			return fmt.Errorf("session opened, want %d", a.Expect.Status)
		}
		if res == nil {
			return fmt.Errorf("handshake failed without an answer: %w", err)
		}
		ans := answer{status: res.StatusCode, header: res.Header}
		if res.Body != nil {
			ans.body, _ = io.ReadAll(res.Body)
			res.Body.Close()
		}
		return r.check(&ans, a.Expect)
	}
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	c.SetReadLimit(1 << 20)
	r.liveMu.Lock()
	if r.live == nil {
		r.live = map[string]*websocket.Conn{}
	}
	r.live[a.As] = c
	r.liveMu.Unlock()
	created := a.Created
	if created == "" {
		created = "transcription_session.created"
	}
	return r.liveExpect(&LiveExpectStep{Session: a.As, Events: []string{created}})
}

func (r *caseRun) liveSend(a *LiveSendStep) error {
	c, err := r.liveConn(a.Session)
	if err != nil {
		return err
	}
	ctx, cancel := r.bounded()
	defer cancel()
	write := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return c.Write(ctx, websocket.MessageText, b)
	}
	const rate, piece = 24000, 480
	n := a.AudioMS * rate / 1000
	buf := make([]byte, 0, 2*piece)
	for off := 0; off < n; off += piece {
		buf = buf[:0]
		for i := off; i < min(off+piece, n); i++ {
			v := int16(8000 * math.Sin(2*math.Pi*300*float64(i)/rate))
			buf = append(buf, byte(v), byte(uint16(v)>>8))
		}
		if err := write(map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(buf)}); err != nil {
			return err
		}
	}
	for _, ev := range a.Events {
		if err := write(r.mapValue(ev)); err != nil { // model symbols named in updates
			return err
		}
	}
	if a.Commit {
		return write(map[string]string{"type": "input_audio_buffer.commit"})
	}
	return nil
}

func (r *caseRun) liveExpect(a *LiveExpectStep) error {
	c, err := r.liveConn(a.Session)
	if err != nil {
		return err
	}
	ctx, cancel := r.bounded()
	defer cancel()
	want := a.Events
	var seen []string
	for len(want) > 0 || a.Close != 0 {
		_, b, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			switch {
			case len(want) > 0:
				return fmt.Errorf("session %s ended before %v (saw %v): %w", a.Session, want, seen, err)
			case !errors.As(err, &ce):
				return fmt.Errorf("session %s: want close %d, got %w", a.Session, a.Close, err)
			case int(ce.Code) != a.Close:
				return fmt.Errorf("session %s closed with %d %q, want %d", a.Session, ce.Code, ce.Reason, a.Close)
			}
			return nil
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			return fmt.Errorf("session %s: event %s: %w", a.Session, b, err)
		}
		seen = append(seen, ev.Type)
		if len(want) > 0 && ev.Type == want[0] {
			want = want[1:]
		}
	}
	return nil
}

// closeLive closes every session of the case still open (finish).
func (r *caseRun) closeLive() {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	for _, c := range r.live {
		_ = c.CloseNow()
	}
	r.live = nil
}
