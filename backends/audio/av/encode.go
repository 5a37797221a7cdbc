package av

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// EncodeOptions say how Encode writes its container.
type EncodeOptions struct {
	Muxer   string // FFmpeg's muxer: "adts", "ipod" (M4A), "mp4", "webm", ...
	Encoder string // FFmpeg's encoder: "aac", "libopus", "libvorbis", "alac", ...
	Rate    int
	// Channels of the interleaved input (default 1).
	Channels int
	// Bitrate in bits per second; 0: the encoder's default.
	Bitrate int64
	// Limit bounds the output in bytes.
	Limit int64
	// Streamable writes as to a pipe, never seeking back (a WebM then
	// states no duration, as browsers' MediaRecorder writes it).
	Streamable bool
	// Options are the muxer's, as "key=value:key=value".
	Options string
}

// encodeChunk is the frames passed to the shim at a time.
const encodeChunk = 8192

// Encode encodes interleaved PCM16 pcm as o says and returns the
// container's bytes. It stops between chunks when ctx ends.
func Encode(ctx context.Context, o EncodeOptions, pcm []int16) ([]byte, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	ch := max(o.Channels, 1)
	if len(pcm)%ch != 0 {
		return nil, fmt.Errorf("av: %d samples are not whole frames of %d channels", len(pcm), ch)
	}
	mux, enc, opts := native.CString(o.Muxer), native.CString(o.Encoder), native.CString(o.Options)
	defer native.Free(mux)
	defer native.Free(enc)
	defer native.Free(opts)
	streamable := int32(0)
	if o.Streamable {
		streamable = 1
	}
	e := avEncOpen(mux, enc, int32(o.Rate), int32(ch), o.Bitrate, o.Limit, streamable, opts)
	if e == nil {
		return nil, fmt.Errorf("av: out of memory opening the encoder")
	}
	defer avEncClose(e)
	pub := (*encPub)(e)
	fail := func() error {
		return fmt.Errorf("av: encoding %s in %s: %s", o.Encoder, o.Muxer, cstr(pub.err[:]))
	}
	if pub.failed != 0 {
		return nil, fail()
	}
	buf := native.Malloc(encodeChunk * ch * 2)
	defer native.Free(buf)
	c := unsafe.Slice((*int16)(buf), encodeChunk*ch)
	for done := 0; done < len(pcm); {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("av: encoding stopped: %w", err)
		}
		n := copy(c, pcm[done:])
		if avEncWrite(e, buf, int64(n/ch)) != 0 {
			return nil, fail()
		}
		done += n
	}
	if avEncEnd(e) != 0 {
		return nil, fail()
	}
	return append([]byte(nil), unsafe.Slice((*byte)(pub.data), pub.size)...), nil
}
