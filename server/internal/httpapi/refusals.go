package httpapi

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// refused reports whether e is an expected refusal rather than a fault:
// every 4xx (and 499, a client that went away) and the 503s server_busy and
// shutting_down. Refusals are counted and logged sampled at INFO; the other
// 5xx are logged at ERROR, each (CONTRACT.md err.refusal-log).
func refused(e *Error) bool {
	return e.Status < 500 || e.Type == "server_busy" || e.Type == "shutting_down"
}

// Refusal log sampling: per error type, at most RefusalBurst lines at once
// and RefusalRate lines a second after that; each logged line carries how
// many lines of its type were suppressed since the previous one.
const (
	RefusalRate  = 1.0
	RefusalBurst = 5
)

// Refusals counts refusals and logs them sampled. RequestIDs puts it in
// every request's state, where WriteError finds it.
type Refusals struct {
	count func(typ, code string) // the metrics' refusal counter
	// Now is time.Now; tests pin it before serving.
	Now func() time.Time

	mu      sync.Mutex
	buckets map[string]*refusalBucket // by error type: a fixed, small set
}

type refusalBucket struct {
	tokens     float64
	last       time.Time
	suppressed int64
}

// NewRefusals returns a sink that counts each refusal with count (its
// error type and code) and logs it sampled.
func NewRefusals(count func(typ, code string)) *Refusals {
	return &Refusals{count: count, Now: time.Now, buckets: map[string]*refusalBucket{}}
}

// record counts one refusal and logs it if its type's bucket allows.
func (k *Refusals) record(r *http.Request, e *Error) {
	k.count(e.Type, e.Code)
	ok, suppressed := k.allow(e.Type)
	if !ok {
		return
	}
	Logger(r.Context()).Info("request refused", slog.Int("status", e.Status), slog.String("type", e.Type),
		slog.String("code", e.Code), slog.String("message", e.Message), slog.Int64("suppressed", suppressed))
}

// allow takes a token from typ's bucket; it returns whether a line may be
// logged and how many were suppressed before it.
func (k *Refusals) allow(typ string) (bool, int64) {
	now := k.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.buckets[typ]
	if !ok {
		b = &refusalBucket{tokens: RefusalBurst, last: now}
		k.buckets[typ] = b
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(RefusalBurst, b.tokens+d.Seconds()*RefusalRate)
	}
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}
