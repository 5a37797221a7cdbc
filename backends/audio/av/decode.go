package av

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"unsafe"
)

// Container is a demuxer, chosen by the caller from the file's first
// bytes.
type Container int32

// The containers read here.
const (
	WebM Container = 1 // Matroska and WebM (EBML magic 1A 45 DF A3)
	MP4  Container = 2 // MP4, M4A, MOV, 3GP ("ftyp" at offset 4)
	ADTS Container = 3 // raw AAC in ADTS frames (sync FFF, layer 0)
)

// FFmpeg's codec IDs (libavcodec/codec_id.h, 5.1) of the audio decoded here.
const (
	codecAAC    = 0x15002
	codecVorbis = 0x15005
	codecOpus   = 0x1503c
)

// Info is what the header states about the audio track, before decoding.
type Info struct {
	Codec    string  // "opus", "vorbis", "aac", or FFmpeg's name of another codec
	Channels int     // 0 when the header does not say
	Rate     int     // 0 when the header does not say
	Seconds  float64 // the stated duration; < 0 when unknown
	// TrackSeconds: Seconds is the audio track's own duration (an MP4's
	// mdhd), not the file's (a Matroska segment's covers every track).
	TrackSeconds bool
	AudioTracks  int
	Streams      int // tracks of any kind
}

// Decoder decodes one upload's audio track.
type Decoder struct {
	d    unsafe.Pointer
	pub  *decPub
	id   uint64
	src  *source
	ctx  context.Context
	stop func() bool
	done chan struct{}
	info Info
}

// Open parses the header of the size-byte file src with container's
// demuxer. ctx's end interrupts the demuxer (and every later call). The
// error wraps ErrDamaged, ErrNoAudio or ErrUnavailable, or ctx's error;
// the Decoder must be closed.
func Open(ctx context.Context, src io.ReaderAt, size int64, c Container) (*Decoder, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	d := &Decoder{src: &source{ctx: ctx, src: src}, ctx: ctx, done: make(chan struct{})}
	d.id = nextID.Add(1)
	sources.Store(d.id, d.src)
	d.d = avOpen(readCB, d.id, size, int32(c))
	if d.d == nil {
		sources.Delete(d.id)
		return nil, fmt.Errorf("av: out of memory opening the decoder")
	}
	d.pub = (*decPub)(d.d)
	// The stop flag is C memory that Close frees: Close waits for a
	// running AfterFunc before freeing it.
	d.stop = context.AfterFunc(ctx, func() {
		defer close(d.done)
		atomic.StoreInt32(&d.pub.stop, 1)
	})
	if err := d.err("reading the container"); err != nil {
		d.Close()
		return nil, err
	}
	p := d.pub
	d.info = Info{Channels: int(p.channels), Rate: int(p.rate), Seconds: -1, TrackSeconds: p.trackDuration != 0, AudioTracks: int(p.audioTracks), Streams: int(p.streams)}
	if p.durationUS > 0 {
		d.info.Seconds = float64(p.durationUS) / 1e6
	}
	if c == ADTS && d.info.Channels == 0 && d.info.Rate == 0 {
		// The ADTS demuxer leaves them to a probe that decodes; the first
		// frame's header states them.
		d.info.Channels, d.info.Rate = adtsHeader(src)
	}
	switch p.codec {
	case codecOpus:
		d.info.Codec = "opus"
	case codecVorbis:
		d.info.Codec = "vorbis"
	case codecAAC:
		d.info.Codec = "aac"
	default:
		d.info.Codec = cstr(p.codecName[:])
	}
	return d, nil
}

// Info returns what the header states.
func (d *Decoder) Info() Info { return d.info }

// Bounds limit the decoded frames, which may differ from what the header
// states (an AAC's SBR doubles the rate, a channel configuration may
// change mid-stream): beyond them Next fails with ErrBounds.
type Bounds struct {
	Channels    int // channels per frame
	Rate        int // samples per second per channel
	TotalPerSec int // samples per second over all channels
}

// Start opens the decoder for output at rate (0: the first frame's own
// rate). The codec must be opus, vorbis or aac (else ErrCodec).
func (d *Decoder) Start(rate int, b Bounds) error {
	if avStart(d.d, int32(rate), int32(b.Channels), int32(b.Rate), int32(b.TotalPerSec)) != 0 {
		return d.err("opening the decoder")
	}
	return nil
}

// Next appends the mono PCM16 decoded from at most one packet to dst
// and returns it, with done set once everything is decoded. The error
// wraps ErrDamaged or ErrBounds, or the context's error.
func (d *Decoder) Next(dst []int16) ([]int16, bool, error) {
	if err := d.ctx.Err(); err != nil {
		return dst, false, fmt.Errorf("av: decoding stopped: %w", err)
	}
	n := avNext(d.d)
	if n < 0 || d.src.err != nil {
		return dst, false, d.err("decoding")
	}
	if n > 0 {
		dst = append(dst, unsafe.Slice((*int16)(d.pub.out), n)...)
	}
	return dst, d.pub.eof != 0, nil
}

// Packets returns the packets sent to the decoder so far.
func (d *Decoder) Packets() int64 { return d.pub.packets }

// OutputFormat returns the last decoded frame's channels and rate.
func (d *Decoder) OutputFormat() (channels, rate int) {
	return int(d.pub.outChannels), int(d.pub.outInRate)
}

// err returns the shim's recorded failure as an error, or nil.
func (d *Decoder) err(what string) error {
	p := d.pub
	msg := cstr(p.err[:])
	switch {
	case d.src.err != nil:
		return d.src.err
	case p.kind == 0:
		return nil
	case p.kind == 5 || d.ctx.Err() != nil:
		return fmt.Errorf("av: %s stopped: %w", what, d.ctx.Err())
	case p.kind == 1:
		return fmt.Errorf("av: %w: %s", ErrDamaged, msg)
	case p.kind == 2:
		return fmt.Errorf("av: %w", ErrNoAudio)
	case p.kind == 3:
		return fmt.Errorf("av: %w", ErrCodec)
	case p.kind == 4:
		return &BoundsError{Channels: int(p.outChannels), Rate: int(p.outInRate)}
	}
	return fmt.Errorf("av: %s: %s", what, msg)
}

// BoundsError is a decoded frame beyond the Bounds; it wraps ErrBounds.
type BoundsError struct {
	Channels, Rate int // the frame's
}

func (e *BoundsError) Error() string {
	return fmt.Sprintf("av: %v: %d channel(s) at %d Hz", ErrBounds, e.Channels, e.Rate)
}

// Unwrap returns ErrBounds.
func (e *BoundsError) Unwrap() error { return ErrBounds }

// Close releases the decoder.
func (d *Decoder) Close() {
	if d.d == nil {
		return
	}
	if !d.stop() {
		<-d.done // the AfterFunc ran or is running: let it finish with the flag
	}
	avClose(d.d)
	d.d, d.pub = nil, nil
	sources.Delete(d.id)
}

// adtsRates are the MPEG-4 sampling frequencies by index.
var adtsRates = []int{96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350}

// adtsHeader returns the channels and rate the ADTS frame header at the
// start of src states (0 when it does not: a channel configuration of 0
// defers to a program config element).
func adtsHeader(src io.ReaderAt) (channels, rate int) {
	var h [4]byte
	if n, _ := src.ReadAt(h[:], 0); n < len(h) || h[0] != 0xFF || h[1]&0xF6 != 0xF0 {
		return 0, 0
	}
	if i := int(h[2]>>2) & 0xF; i < len(adtsRates) {
		rate = adtsRates[i]
	}
	channels = int(h[2]&1)<<2 | int(h[3]>>6)
	if channels == 7 {
		channels = 8
	}
	return channels, rate
}
