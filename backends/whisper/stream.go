package whisper

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"syscall"

	"github.com/sluice-dev/sluice/backends/audio"
)

// segmentStream carries whisper's new segments from its new-segment
// callback (the shim, on whisper's thread) to the request's emit, while
// whisper_full runs: the shim writes each segment as a record to a pipe
// and waits for one acknowledging byte on a second pipe before decoding
// on, so a segment reaches the client before the next window is decoded
// (and a slow client holds its own slot, not memory). No Go code runs on
// whisper's thread: a goroutine reads the records. Both pipes are
// blocking file descriptors (not Go's poller's), so the shim's writes
// never fail with EAGAIN.
type segmentStream struct {
	seg, ack [2]int // pipes: [read, write]
	sink     func(audio.TranscriptDelta) error
	abort    func()
	done     chan error
	emitted  bool // a non-empty segment has gone out (the next one gets a leading space)
}

func newSegmentStream(sink func(audio.TranscriptDelta) error, abort func()) (*segmentStream, error) {
	st := &segmentStream{sink: sink, abort: abort, done: make(chan error, 1)}
	if err := syscall.Pipe2(st.seg[:], syscall.O_CLOEXEC); err != nil {
		return nil, err
	}
	if err := syscall.Pipe2(st.ack[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(st.seg[0])
		syscall.Close(st.seg[1])
		return nil, err
	}
	go st.run()
	return st, nil
}

// fds are the descriptors the shim writes segments to and reads
// acknowledgements from.
func (st *segmentStream) fds() (segment, ack int32) { return int32(st.seg[1]), int32(st.ack[0]) }

// fdReader reads a raw descriptor, retrying on EINTR.
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(f), p)
		if err == syscall.EINTR {
			continue
		}
		if n == 0 && err == nil {
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

func (st *segmentStream) run() {
	// However the reader ends, the shim must not wait for an
	// acknowledgement that never comes: closing the write end makes its
	// read return (end of file) and whisper decode on.
	defer syscall.Close(st.ack[1])
	r := fdReader(st.seg[0])
	var failed error
	var head [24]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			st.done <- errors.Join(failed, err)
			return
		}
		t0 := int64(binary.LittleEndian.Uint64(head[4:]))
		t1 := int64(binary.LittleEndian.Uint64(head[12:]))
		n := int64(binary.LittleEndian.Uint32(head[20:]))
		// A segment is at most n_text_ctx tokens of at most 1024 bytes
		// (CheckModel bounds both): well under maxSegment.
		const maxSegment = 1 << 20
		text := make([]byte, min(n, maxSegment))
		if _, err := io.ReadFull(r, text); err != nil {
			st.done <- errors.Join(failed, err)
			return
		}
		if n > maxSegment {
			if _, err := io.CopyN(io.Discard, r, n-maxSegment); err != nil {
				st.done <- errors.Join(failed, err)
				return
			}
		}
		if failed == nil {
			if seg := strings.TrimSpace(clean(string(text))); seg != "" {
				if st.emitted {
					seg = " " + seg
				}
				st.emitted = true
				if err := st.sink(audio.TranscriptDelta{Delta: seg, Start: cs(t0), End: cs(max(t0, t1))}); err != nil {
					// The client is gone: stop whisper, keep draining.
					failed = err
					st.abort()
				}
			}
		}
		for {
			if _, err := syscall.Write(st.ack[1], []byte{1}); err != syscall.EINTR {
				break
			}
		}
	}
}

// close is called after whisper_full returned: it closes the write end
// (the reader sees the end), waits for the reader and returns the first
// emit error.
func (st *segmentStream) close() error {
	syscall.Close(st.seg[1])
	err := <-st.done
	syscall.Close(st.seg[0])
	syscall.Close(st.ack[0]) // run closed ack[1]
	return err
}

func marshalDelta(d audio.TranscriptDelta) ([]byte, error) { return json.Marshal(d) }
