package edge

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The write deadline and the shutdown slice loop compose: the earlier
// deadline wins, and a deadline a handler sets is kept beside the piece's.
func TestWriteDeadlinesCompose(t *testing.T) {
	tr := newTracker()
	tr.writeTimeout = time.Hour
	c := &Conn{Conn: nopConn{}, t: tr}
	now := time.Now()
	c.pieceWrite = now.Add(time.Hour)
	if err := c.SetWriteDeadline(now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.sliceWrite = now.Add(time.Second)
	if got := earliest(earliest(c.appWrite, c.pieceWrite), c.sliceWrite); !got.Equal(now.Add(time.Second)) {
		t.Fatalf("earliest = %v", got)
	}
	if got := earliest(time.Time{}, time.Time{}); !got.IsZero() {
		t.Fatalf("no deadline became %v", got)
	}
}

// A read deadline equal to the one the socket has is not given again;
// any other is, and so is one whose last setting failed.
func TestReadDeadlineGivenOnce(t *testing.T) {
	rc := &recordingConn{}
	c := &Conn{Conn: rc, t: newTracker()}
	d := time.Now().Add(time.Minute)
	for _, set := range []time.Time{{}, {}, d, d, {}, {}} {
		if err := c.SetReadDeadline(set); err != nil {
			t.Fatal(err)
		}
	}
	if want := []time.Time{{}, d, {}}; !slices.Equal(rc.reads, want) {
		t.Fatalf("deadlines given to the socket: %v, want %v", rc.reads, want)
	}
	rc.fail = true
	_ = c.SetReadDeadline(d)
	rc.fail = false
	if err := c.SetReadDeadline(d); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.reads); n != 5 {
		t.Fatalf("a deadline whose setting failed was not given again: %d settings, want 5", n)
	}
	// The slice loop's deadline composes with net/http's: the earlier one.
	c.mu.Lock()
	c.readDeadline, c.sliceRead = true, d.Add(-time.Second)
	_ = c.applyReadLocked()
	c.mu.Unlock()
	if got := rc.reads[len(rc.reads)-1]; !got.Equal(d.Add(-time.Second)) {
		t.Fatalf("composed read deadline %v, want the slice's", got)
	}
}

// recordingConn records the read deadlines it is given; fail makes the
// setting fail.
type recordingConn struct {
	nopConn
	reads []time.Time
	fail  bool
}

func (c *recordingConn) SetReadDeadline(d time.Time) error {
	c.reads = append(c.reads, d)
	if c.fail {
		return errors.New("closed")
	}
	return nil
}

type nopConn struct{ net.Conn }

func (nopConn) SetReadDeadline(time.Time) error  { return nil }
func (nopConn) SetWriteDeadline(time.Time) error { return nil }

// loopbackPair returns the two ends of one loopback TCP connection, the
// server's wrapped in a Conn of tr.
func loopbackPair(t *testing.T, tr *tracker) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return &Conn{Conn: server, t: tr}, client
}

// A slice loop that ran late (its tick's time a second old, as a ticker's
// value is when it fired) must not fail the answer of a handler that waited
// without I/O meanwhile, for a load say: such a connection gets no write
// deadline from the loop, and each piece written gets its own slice
// (CONTRACT.md time.shutdown-stalled-io). Before, the late tick's deadline
// had passed and the answer failed at once: a manager admitted before
// shutdown lost its 200 (ops.shutting-down.infer, about 1 run in 10 under
// the race detector).
func TestShutdownLateTickSparesWaitingHandler(t *testing.T) {
	tr := newTracker()
	start := time.Now().Add(-2 * time.Second)
	tr.beginShutdown(start)
	c, client := loopbackPair(t, tr)
	c.inHandler = true // past its body: waits for the runtime
	c.tick(time.Now().Add(-time.Second), start.UnixNano())
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatalf("the waiting handler's answer failed: %v", err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "answer" {
		t.Fatalf("client read %q, %v", buf, err)
	}
}

// The same for a client still sending its header or body: a read's slice
// counts from its last progress when the read starts, not from the last
// tick.
func TestShutdownLateTickSparesSendingClient(t *testing.T) {
	tr := newTracker()
	start := time.Now().Add(-2 * time.Second)
	tr.beginShutdown(start)
	c, client := loopbackPair(t, tr)
	c.tick(time.Now().Add(-time.Second), start.UnixNano()) // header phase: a read deadline, long past
	c.lastRead.Store(time.Now().UnixNano())                // the client made progress since
	if _, err := client.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("a client that kept sending was cut: %v", err)
	}
	// A client that made no progress for a slice still fails.
	c.lastRead.Store(time.Now().Add(-time.Second).UnixNano())
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled client's read: %v", err)
	}
}

// The automatic connection limit leaves headroom under RLIMIT_NOFILE and
// never goes below its floor; Config.MaxConns 0 means it, and a negative
// one no limit (edge.conn-limit).
func TestAutoMaxConns(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{1024, 960}, {50, minAutoConns}, {0, 960}, {1 << 20, 1<<20 - fdHeadroom}} {
		if got := autoMaxConns(c.nofile); got != c.want {
			t.Errorf("autoMaxConns(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
	log := slog.New(slog.DiscardHandler)
	e, err := New(Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.MaxConns(), autoMaxConns(fileLimit()); got != want {
		t.Fatalf("maxConns %d, want %d", got, want)
	}
	if e, _ = New(Config{MaxConns: -1, Log: log}); e.MaxConns() > 0 {
		t.Fatalf("negative --max-conns should disable the limit, got %d", e.MaxConns())
	}
	if e, _ = New(Config{MaxConns: 7, Log: log}); e.MaxConns() != 7 {
		t.Fatalf("--max-conns 7 became %d", e.MaxConns())
	}
}

// slowConn takes a virtual millisecond per Write and records the write
// deadlines set on it.
type slowConn struct {
	nopConn
	deadlines []time.Time
	writes    int
}

func (c *slowConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

func (c *slowConn) Write(p []byte) (int, error) {
	<-time.After(time.Millisecond) // the synctest bubble's virtual clock: each write takes a millisecond
	c.writes++
	return len(p), nil
}

// edge.write-timeout: a large write is cut into pieces, and each piece gets
// its own deadline --write-timeout after it starts, so a slow but reading
// client is never cut off, while one that accepts nothing for that long
// is (edgemutants piece-deadline-armed-once, piece-deadline-skipped).
func TestWriteDeadlinePerPiece(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTracker()
		tr.writeTimeout = time.Second
		sc := &slowConn{}
		c := &Conn{Conn: sc, t: tr}
		start := time.Now()
		if n, err := c.Write(make([]byte, 3*writePiece)); err != nil || n != 3*writePiece {
			t.Fatalf("wrote %d, %v", n, err)
		}
		if sc.writes != 3 || len(sc.deadlines) != 3 {
			t.Fatalf("%d writes, %d deadlines, want 3 pieces each with its deadline", sc.writes, len(sc.deadlines))
		}
		for i, d := range sc.deadlines {
			if want := start.Add(time.Duration(i)*time.Millisecond + time.Second); !d.Equal(want) {
				t.Fatalf("piece %d: deadline start+%v, want start+%v", i, d.Sub(start), want.Sub(start))
			}
		}
	})
}

// A piece keeps an earlier piece's write deadline only when that one was
// armed within about a thousandth of the timeout, 10 ms at most: never a
// later deadline, and earlier by at most that.
func TestWriteSlackBounded(t *testing.T) {
	for _, c := range []struct{ wt, want time.Duration }{
		{30 * time.Second, maxWriteSlack},
		{time.Second, time.Second >> 10},
		{100 * time.Millisecond, 100 * time.Millisecond >> 10},
		{0, 0},
	} {
		if got := writeSlack(c.wt); got != c.want || got > c.wt/1000+time.Microsecond {
			t.Errorf("writeSlack(%v) = %v, want %v", c.wt, got, c.want)
		}
	}
}
