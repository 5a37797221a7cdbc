package av

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// rssKB reads VmRSS from /proc/self/status.
func rssKB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var n int
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// Native memory stays flat over many decodes (whole, failing at the
// header, failing mid-stream, stopped) and encodes: every path frees what
// FFmpeg allocated (a leaked demuxer and its 32 KiB I/O buffer per round
// would be over 9 MiB).
func TestNativeMemoryFlat(t *testing.T) {
	need(t)
	webm, err := Encode(context.Background(), EncodeOptions{Muxer: "webm", Encoder: "libopus", Rate: 48000, Limit: 1 << 24}, tone(48000, 0.3))
	if err != nil {
		t.Fatal(err)
	}
	m4a, err := Encode(context.Background(), EncodeOptions{Muxer: "ipod", Encoder: "aac", Rate: 16000, Limit: 1 << 24}, tone(16000, 0.3))
	if err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	round := func() {
		decodeAll(context.Background(), webm, WebM, 16000)
		decodeAll(context.Background(), m4a, MP4, 16000)
		decodeAll(context.Background(), m4a[:len(m4a)/2], MP4, 16000)  // no moov: fails at the header
		decodeAll(context.Background(), webm[:len(webm)*3/4], WebM, 0) // ends early
		decodeAll(stopped, webm, WebM, 16000)
		decodeAll(context.Background(), m4a, WebM, 16000) // the wrong demuxer
		Encode(context.Background(), EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: 16000, Limit: 1 << 20}, tone(16000, 0.2))
		Encode(context.Background(), EncodeOptions{Muxer: "adts", Encoder: "aac", Rate: 16000, Limit: 500}, tone(16000, 0.2)) // fails at the limit
	}
	measure := func() int {
		debug.FreeOSMemory()
		native.TrimHeap()
		return rssKB(t)
	}
	for range 50 {
		round()
	}
	before := measure()
	for range 300 {
		round()
	}
	after := measure()
	t.Logf("RSS %d kB after 50 rounds, %d kB after 350", before, after)
	if after-before > 8<<10 {
		t.Fatalf("RSS grew %d kB over 300 rounds of 8 calls", after-before)
	}
}
