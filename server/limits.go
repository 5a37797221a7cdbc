package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// Limits of the serving edge (CONTRACT.md "Connections and request bodies",
// matrix edge). Every request body is bounded in size (--max-body), in time
// (--body-read-timeout for the whole body, --min-body-rate after
// --body-rate-grace), and in the server-wide bytes that bodies in flight may
// hold (--body-budget in memory, --spool-budget on disk). Uploads over
// --spool-threshold are spooled to a temporary file and handed to engines as
// a backends.Blob; JSON bodies have their own small limit (--max-json-body).
const (
	// probeReserve is how many connections past --max-conns are accepted
	// when no open connection can be closed in their favour; they are
	// served only for /healthz and /readyz (edge.conn-limit).
	probeReserve = 8
	// fdHeadroom is what the automatic --max-conns leaves of RLIMIT_NOFILE
	// for files, the listener, the spool, the probe reserve and the engines.
	fdHeadroom   = 64
	minAutoConns = 16
	// refuseDrain bounds how long net/http may read the rest of a body
	// that was refused unread (413, 503 body_budget) to keep the
	// connection.
	refuseDrain = time.Second
	// maxFormField bounds a multipart field other than the file.
	maxFormField = 4 << 10
)

// bodyLimits is what the body middleware and the body readers share: the
// server's configuration and its two budgets.
type bodyLimits struct {
	readTimeout time.Duration // the whole body; 0: none
	minRate     int64         // bytes/s after grace; 0: none
	grace       time.Duration
	threshold   int64 // bodies over it are spooled
	maxJSON     int64
	spoolDir    string
	mem, disk   *budget
}

// budget is a server-wide count of bytes with a limit (0: unlimited). A
// reservation that does not fit is refused at once, never waited for
// (edge.body-budget).
type budget struct {
	mu    sync.Mutex
	used  int64
	limit int64
	// changed, when set, is called after every change of used: the
	// connection tracker's notify, so that tests can await a reservation.
	changed func()
}

func (b *budget) take(n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	if b.limit > 0 && b.used+n > b.limit {
		b.mu.Unlock()
		return false
	}
	b.used += n
	b.mu.Unlock()
	if b.changed != nil {
		b.changed()
	}
	return true
}

func (b *budget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	if b.changed != nil {
		b.changed()
	}
}

// inUse returns the reserved bytes (metrics, tests).
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// errBodyTimeout marks a body that did not arrive in time (408).
var errBodyTimeout = errors.New("request body not received in time")

// errBodyBudget marks a body of unknown length that outgrew the budget.
var errBodyBudget = errors.New("request bodies in flight exceed the server's budget")

func bodyTimeout() *Error {
	return &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
		Message: "the request body was not received in time (--body-read-timeout, --min-body-rate)", Err: errBodyTimeout}
}

func bodyBusy() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_busy", Code: "body_budget",
		Message: "too many request bytes in flight; retry later", Err: errBodyBudget}
}

// bodyError maps an error of reading a request body to its answer: 413 over
// the size limit, 408 too slow, 503 over the budget, else 400.
func bodyError(what string, err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(tooBig.Limit)
	case errors.Is(err, errBodyTimeout):
		return bodyTimeout()
	case errors.Is(err, errBodyBudget):
		return bodyBusy()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Invalid("%s: %v", what, err)
}

// bodyReader is a request body under the read deadlines: before each read
// the connection's read deadline is set to the earlier of the whole-body
// deadline and the rate deadline (start + grace + received/minRate), so it
// moves out as bytes arrive (edge.body-timeout, edge.body-min-rate). At the
// end of the body (EOF or an error other than a timeout) the deadline is
// lifted at once: net/http's background read, which starts at EOF, must
// not inherit it (conns.go). After a timeout the expired deadline stays
// and the answer closes the connection.
type bodyReader struct {
	body  io.ReadCloser
	w     http.ResponseWriter
	rc    *http.ResponseController
	lim   *bodyLimits
	start time.Time
	n     int64

	// Reservations against the budgets: the declared length up front, or,
	// for a body of unknown length, what was read so far.
	declared      bool
	memHeld, disk int64

	err     error // sticky
	cleared bool
	ended   bool // a read returned an error (io.EOF included)
}

func (b *bodyReader) deadline() time.Time {
	var d time.Time
	if b.lim.readTimeout > 0 {
		d = b.start.Add(b.lim.readTimeout)
	}
	if b.lim.minRate > 0 {
		rd := b.start.Add(b.lim.grace + time.Duration(float64(b.n)/float64(b.lim.minRate)*float64(time.Second)))
		if d.IsZero() || rd.Before(d) {
			d = rd
		}
	}
	return d
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if d := b.deadline(); !d.IsZero() {
		if !time.Now().Before(d) {
			return 0, b.fail(errBodyTimeout)
		}
		_ = b.rc.SetReadDeadline(d)
		b.cleared = false
	}
	n, err := b.body.Read(p)
	b.n += int64(n)
	if err != nil {
		b.ended = true
	}
	if !b.declared && n > 0 && !b.account(int64(n)) {
		return n, b.fail(errBodyBudget)
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, b.fail(fmt.Errorf("%w: %d bytes after %v", errBodyTimeout, b.n, time.Since(b.start).Round(time.Millisecond)))
		}
		b.lift()
	}
	return n, err
}

// account reserves n more bytes of a body of unknown length: its first
// threshold bytes against the memory budget, the rest against the spool's.
func (b *bodyReader) account(n int64) bool {
	m := min(n, max(0, b.lim.threshold-b.memHeld))
	if !b.lim.mem.take(m) {
		return false
	}
	b.memHeld += m
	if !b.lim.disk.take(n - m) {
		return false
	}
	b.disk += n - m
	return true
}

// fail makes err sticky and the answer close the connection: the rest of
// the body is never read, and the expired read deadline makes net/http's
// attempt to read it fail at once.
func (b *bodyReader) fail(err error) error {
	b.err, b.ended = err, true
	b.w.Header().Set("Connection", "close")
	_ = b.rc.SetReadDeadline(time.Now())
	return err
}

// bodyFailed reports whether err is a body reader's own failure (the
// connection keeps its expired read deadline and closes).
func bodyFailed(err error) bool {
	return errors.Is(err, errBodyTimeout) || errors.Is(err, errBodyBudget)
}

// finish runs when the handler returns: the reservations are given back,
// and a body the handler did not read to its end stays under its
// deadlines while net/http reads what is left of it (at most 256 KiB) to
// reuse the connection.
func (b *bodyReader) finish() {
	b.release()
	if !b.ended {
		if d := b.deadline(); !d.IsZero() {
			_ = b.rc.SetReadDeadline(d)
		}
	}
}

// lift clears the read deadline this reader set.
func (b *bodyReader) lift() {
	if !b.cleared {
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

func (b *bodyReader) Close() error { return b.body.Close() }

// release gives the reservations back (the request ended).
func (b *bodyReader) release() {
	b.lim.mem.give(b.memHeld)
	b.lim.disk.give(b.disk)
	b.memHeld, b.disk = 0, 0
}

type limitsKey struct{}

// limitsFrom returns the body limits of a request, or nil (a request that
// did not pass the middleware, as in some tests).
func limitsFrom(ctx context.Context) *bodyLimits {
	l, _ := ctx.Value(limitsKey{}).(*bodyLimits)
	return l
}

// spooled is an upload's payload: in memory up to the spool threshold,
// else in a temporary file removed by Close.
type spooled struct {
	data []byte   // the payload when it is in memory
	f    *os.File // the spool file otherwise
	size int64
}

// fileBlob is a spool file as a backends.Blob.
type fileBlob struct {
	*os.File
	size int64
}

func (f fileBlob) Size() int64 { return f.size }

// blob returns the payload as a backends.Blob.
func (s *spooled) blob() backends.Blob {
	if s.f != nil {
		return fileBlob{File: s.f, size: s.size}
	}
	return bytes.NewReader(s.data)
}

// Close removes the spool file, if any; it is safe to call twice.
func (s *spooled) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	name := s.f.Name()
	err := s.f.Close()
	if rerr := os.Remove(name); rerr != nil && err == nil {
		err = rerr
	}
	s.f = nil
	return err
}

// spoolBody reads r to its end: up to threshold bytes stay in memory, a
// longer payload goes to a temporary file in dir (edge.upload-spool). The
// caller closes the result, which removes the file; on error nothing is
// left behind.
func spoolBody(r io.Reader, threshold int64, dir string) (*spooled, error) {
	data, err := io.ReadAll(io.LimitReader(r, threshold+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) <= threshold {
		return &spooled{data: data, size: int64(len(data))}, nil
	}
	f, err := os.CreateTemp(dir, "sluice-body-*")
	if err != nil {
		return nil, &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "cannot spool the upload",
			Err: fmt.Errorf("server: spool: %w", err)}
	}
	s := &spooled{f: f}
	n, err := f.Write(data)
	data = nil
	if err == nil {
		var m int64
		m, err = io.Copy(f, r)
		s.size = int64(n) + m
	}
	if err != nil {
		_ = s.Close()
		var pe *os.PathError
		if errors.As(err, &pe) { // the spool's own write failed (disk full)
			return nil, &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "cannot spool the upload",
				Err: fmt.Errorf("server: spool: %w", err)}
		}
		return nil, err
	}
	return s, nil
}

// initLimits derives the edge's limits from the configuration: the body
// limits and budgets, the write timeout and the connection limit of the
// tracker. It logs the connection limit in use.
func (s *Server) initLimits() {
	c := &s.cfg
	s.limits = &bodyLimits{readTimeout: c.BodyReadTimeout, minRate: c.MinBodyRate, grace: c.BodyRateGrace,
		threshold: c.SpoolThreshold, maxJSON: c.MaxJSONBody, spoolDir: c.SpoolDir,
		mem: &budget{limit: c.BodyBudget, changed: s.conns.notify}, disk: &budget{limit: c.SpoolBudget, changed: s.conns.notify}}
	s.conns.writeTimeout = c.WriteTimeout
	maxConns, nofile := c.MaxConns, fileLimit()
	if maxConns == 0 {
		maxConns = autoMaxConns(nofile)
	}
	s.conns.maxConns = maxConns
	s.log.Info("connection limit", "max_conns", maxConns, "rlimit_nofile", nofile, "write_timeout", c.WriteTimeout,
		"body_read_timeout", c.BodyReadTimeout, "min_body_rate", c.MinBodyRate)
}

// autoMaxConns is the default connection limit for a soft RLIMIT_NOFILE of
// nofile (0: unknown): the limit less fdHeadroom, at least minAutoConns.
func autoMaxConns(nofile uint64) int {
	if nofile == 0 {
		return 1024 - fdHeadroom
	}
	return int(max(int64(min(nofile, 1<<30))-fdHeadroom, minAutoConns))
}
