package edge

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// deadlineWriter is a ResponseWriter that records the read deadlines
// http.ResponseController sets through it.
type deadlineWriter struct {
	header    http.Header
	deadlines []time.Time
}

func (d *deadlineWriter) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}
func (d *deadlineWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *deadlineWriter) WriteHeader(int)             {}
func (d *deadlineWriter) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// pacedBody yields size bytes in pieces of piece bytes, each after every
// seconds of (virtual) time.
type pacedBody struct {
	left, piece int
	every       time.Duration
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	<-time.After(p.every) // virtual: the synctest bubble's clock
	n := min(p.piece, p.left, len(b))
	p.left -= n
	return n, nil
}

func (p *pacedBody) Close() error { return nil }

// edge.body-min-rate: the rate deadline moves out as bytes arrive. Before
// each read it is start + grace + received/rate, so a client that keeps
// the rate is never cut off, however long its body; at the end of the body
// the deadline is lifted (edgemutants body-deadline-once,
// body-deadline-not-lifted).
func TestBodyRateDeadlineMovesWithBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, piece = 1000, 100 // 100 bytes every 50 ms: 2,000 B/s, twice the rate
		lim := &bodyLimits{minRate: rate, grace: 100 * time.Millisecond, mem: &budget{}, disk: &budget{}}
		w := &deadlineWriter{}
		start := time.Now()
		b := &bodyReader{body: &pacedBody{left: 20 * piece, piece: piece, every: 50 * time.Millisecond},
			w: w, rc: *http.NewResponseController(w), lim: lim, start: start, declared: true}
		buf := make([]byte, 4096)
		got := 0
		for {
			n, err := b.Read(buf)
			got += n
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("a body sent at twice the minimum rate failed after %v: %v", time.Since(start), err)
			}
		}
		if got != 20*piece {
			t.Fatalf("read %d bytes, want %d", got, 20*piece)
		}
		// One deadline before each read (21: 20 pieces and the EOF), each
		// start + grace + received/rate, then the lift.
		if len(w.deadlines) != 22 {
			t.Fatalf("%d read deadlines set, want 21 (one per read) and the lift: %v", len(w.deadlines), w.deadlines)
		}
		for i, d := range w.deadlines[:21] {
			want := start.Add(lim.grace + time.Duration(i*piece)*time.Second/rate)
			if !d.Equal(want) {
				t.Fatalf("deadline %d = start+%v, want start+%v", i, d.Sub(start), want.Sub(start))
			}
		}
		if last := w.deadlines[21]; !last.IsZero() {
			t.Fatalf("the read deadline stays after the body's end: start+%v", last.Sub(start))
		}
	})
}

// A budget admits reservations up to its limit exactly, and not one byte
// more; what is given back can be taken again (edge.body-budget;
// edgemutants budget-limit-off-by-one).
func TestBudgetEdges(t *testing.T) {
	b := &budget{limit: 10}
	steps := []struct {
		take, give int64
		ok         bool
		used       int64
	}{
		{take: 4, ok: true, used: 4},
		{take: 6, ok: true, used: 10}, // exactly the limit
		{take: 1, ok: false, used: 10},
		{give: 3, used: 7},
		{take: 4, ok: false, used: 7}, // one byte past the limit
		{take: 3, ok: true, used: 10},
		{take: 0, ok: true, used: 10}, // nothing to reserve
		{give: 10, used: 0},
	}
	for i, s := range steps {
		if s.give > 0 {
			b.give(s.give)
		} else if got := b.take(s.take); got != s.ok {
			t.Fatalf("step %d: take(%d) = %v, want %v", i, s.take, got, s.ok)
		}
		if got := b.inUse(); got != s.used {
			t.Fatalf("step %d: %d bytes in use, want %d", i, got, s.used)
		}
	}
	if !(&budget{}).take(1 << 40) {
		t.Fatal("a budget without a limit refused a reservation")
	}
}

// errBody fails its first read with err.
type errBody struct{ err error }

func (b errBody) Read([]byte) (int, error) { return 0, b.err }
func (b errBody) Close() error             { return nil }

// A read that hits the connection's read deadline is the body's timeout
// (408 request_timeout), sticky, and the answer closes the connection
// (edge.body-timeout; edgemutants body-timeout-ignored).
func TestBodyReadDeadlineIs408(t *testing.T) {
	w := &deadlineWriter{}
	lim := &bodyLimits{readTimeout: time.Minute, mem: &budget{}, disk: &budget{}}
	b := &bodyReader{body: errBody{err: os.ErrDeadlineExceeded}, w: w, rc: *http.NewResponseController(w), lim: lim,
		start: time.Now(), declared: true}
	_, err := b.Read(make([]byte, 8))
	var e *Error
	if !errors.Is(err, errBodyTimeout) || !errors.As(BodyError("reading", err), &e) || e.Status != http.StatusRequestTimeout {
		t.Fatalf("a read past the deadline: %v", err)
	}
	if _, again := b.Read(make([]byte, 8)); !errors.Is(again, errBodyTimeout) {
		t.Fatalf("the timeout is not sticky: %v", again)
	}
	if w.Header().Get("Connection") != "close" {
		t.Fatal("the answer to a timed-out body keeps the connection")
	}
}

// A body of unknown length is charged as it arrives: its first threshold
// bytes to the memory budget, the rest to the spool's, and it fails with
// the budget's error once it outgrows them; release gives it all back
// (edge.body-budget; edgemutants budget-chunked-untracked).
func TestChunkedBodyCharged(t *testing.T) {
	lim := &bodyLimits{threshold: 4, mem: &budget{limit: 4}, disk: &budget{limit: 4}}
	w := &deadlineWriter{}
	b := &bodyReader{body: io.NopCloser(strings.NewReader(strings.Repeat("x", 10))), w: w, rc: *http.NewResponseController(w),
		lim: lim, start: time.Now()}
	buf := make([]byte, 6)
	if n, err := b.Read(buf); n != 6 || err != nil {
		t.Fatalf("6 of 8 budgeted bytes: %d, %v", n, err)
	}
	if lim.mem.inUse() != 4 || lim.disk.inUse() != 2 {
		t.Fatalf("charged %d in memory and %d on disk, want 4 and 2", lim.mem.inUse(), lim.disk.inUse())
	}
	if _, err := b.Read(buf); !errors.Is(err, errBodyBudget) {
		t.Fatalf("past the budgets: %v", err)
	}
	b.release()
	if lim.mem.inUse() != 0 || lim.disk.inUse() != 0 {
		t.Fatalf("after release: %d in memory, %d on disk", lim.mem.inUse(), lim.disk.inUse())
	}
}
