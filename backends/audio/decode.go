package audio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/audio/av"
)

// Bounded decoding of request audio (CONTRACT.md audio.*): the header is parsed with
// small ReadAt calls, the duration it states is checked against the
// engine's limit before any sample is decoded, and the samples are then
// decoded and resampled in chunks of decodeChunk input bytes, with the
// request's context checked between chunks. Memory is the output samples
// (preallocated from the header) plus a constant.

const (
	// decodeChunk is the input read, converted and resampled at a time.
	decodeChunk = 64 << 10
	// maxRIFFChunks bounds the chunks walked to find fmt and data, so a
	// file of empty chunks cannot make the header walk the work.
	maxRIFFChunks = 1024
	// unknownSize: a data size at or above it is a streamed WAV's
	// "unknown" (StreamHeader writes 0xFFFFFFFF-36, others 0xFFFFFFFF);
	// its duration is then the bytes present.
	unknownSize = 0xFFFFF000
)

// Want is what an engine accepts as input audio.
type Want struct {
	// Rate is the engine's sample rate; the audio is resampled to it.
	Rate int
	// MaxSeconds is the longest audio accepted (> 0), checked against the
	// duration the header states before decoding.
	MaxSeconds float64
	// RawRate is the declared rate of raw PCM16LE mono input (the
	// request's sample_rate). Zero: the input must be a WAV file; audio in
	// no recognised format is refused, never read as raw PCM.
	RawRate int
}

// DecodeInput decodes a request's audio (req.Body when set, else
// req.Data) to mono PCM16 at want.Rate. It refuses, with errors wrapping
// backends.ErrInvalid: empty input, unrecognised formats (AIFF, text, ...),
// undecodable FLAC, Ogg, MP3, WebM, MP4 or ADTS data (or a codec in them
// not decoded here), raw PCM without a declared rate, and audio whose stated duration
// exceeds want.MaxSeconds, each before decoding anything. A data chunk
// shorter than its size field decodes what is there. When ctx ends it stops
// between chunks and returns an error wrapping ctx's.
func DecodeInput(ctx context.Context, req backends.Request, want Want) (Audio, error) {
	a, err := decodeInput(ctx, req, want)
	// The audio is the upload's file: a refusal of it names that field.
	return a, backends.WithParam("file", err)
}

func decodeInput(ctx context.Context, req backends.Request, want Want) (Audio, error) {
	if err := checkRate(want.Rate); err != nil {
		return Audio{}, fmt.Errorf("audio: engine rate: %w", err)
	}
	if want.MaxSeconds <= 0 {
		return Audio{}, errors.New("audio: DecodeInput needs a positive MaxSeconds")
	}
	var src backends.Blob = bytes.NewReader(req.Data)
	if req.Body != nil {
		src = req.Body
	}
	if src.Size() == 0 {
		return Audio{}, backends.Invalidf("audio: request has no audio data")
	}
	switch c, name := formatOf(src, want.RawRate); {
	case c != 0:
		return decodeContainer(ctx, src, c, name, want.Rate, want.MaxSeconds)
	case name != "":
		return decodeCodec(ctx, src, name, want.Rate, want.MaxSeconds)
	}
	h, err := probe(src, want.RawRate)
	if err != nil {
		return Audio{}, err
	}
	// audio.duration-limit: refused from the header, before decoding.
	if s := h.statedSeconds(); s > want.MaxSeconds {
		return Audio{}, backends.InvalidParam("file", "audio: %.1f s of audio, longer than this model's limit of %g s", s, want.MaxSeconds)
	}
	samples, err := h.decode(ctx, src, want.Rate)
	if err != nil {
		return Audio{}, err
	}
	if len(samples) == 0 {
		return Audio{}, backends.Invalidf("audio: no samples")
	}
	return Audio{Rate: want.Rate, Samples: samples}, nil
}

// stream describes where the samples are and how they are encoded.
type stream struct {
	format, channels, rate, bits int
	dataOff, dataLen             int64 // dataLen: bytes present, whole frames or not
	stated                       int64 // the header's data size; -1 when unknown
}

func (h *stream) frame() int64 { return int64(h.bits / 8 * h.channels) }

// statedSeconds is the duration the header states (for a streamed WAV or
// raw PCM, that of the bytes present).
func (h *stream) statedSeconds() float64 {
	n := h.stated
	if n < 0 {
		n = h.dataLen
	}
	return float64(n/h.frame()) / float64(h.rate)
}

// formatOf names the container (FFmpeg's) or the compressed format
// (libsndfile's) src starts with, from one read of its first bytes: a
// Container and its name, or 0 and the codec's name, or 0 and "" for
// neither (always for declared raw PCM).
func formatOf(src io.ReaderAt, rawRate int) (av.Container, string) {
	if rawRate != 0 {
		return 0, ""
	}
	var head [8]byte
	n, _ := src.ReadAt(head[:], 0)
	if c, name := containerName(head[:n]); c != 0 {
		return c, name
	}
	return 0, codecName(head[:n])
}

// codecOf names the libsndfile format src starts with ("" for none, for a
// container and always for declared raw PCM).
func codecOf(src io.ReaderAt, rawRate int) string {
	c, name := formatOf(src, rawRate)
	if c != 0 {
		return ""
	}
	return name
}

// probe reads the header of src: WAV, or raw PCM16LE when rawRate is
// declared.
func probe(src backends.Blob, rawRate int) (*stream, error) {
	var head [12]byte
	n, err := src.ReadAt(head[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("audio: reading the upload: %w", err)
	}
	if IsWAV(head[:n]) {
		return parseHeader(src)
	}
	if rawRate == 0 {
		// audio.unknown-format / audio.raw-declared
		return nil, invalid("%s is not supported: send WAV (PCM 8/16/24/32-bit or float32), FLAC, Ogg Vorbis/Opus, MP3, WebM (Opus, Vorbis), MP4/M4A or ADTS (AAC), or raw PCM16LE mono with its sample_rate (Content-Type: audio/L16; rate=N)", sniff(head[:n]))
	}
	if err := checkUpload("raw PCM16", 1, rawRate); err != nil {
		return nil, err
	}
	size := src.Size()
	if size%2 != 0 {
		return nil, invalid("raw PCM16 has an odd byte count (%d)", size)
	}
	return &stream{format: formatPCM, channels: 1, rate: rawRate, bits: 16, dataLen: size, stated: size}, nil
}

// sniff names the format of a payload that is not a WAV file, for the
// error message.
func sniff(b []byte) string {
	has := func(off int, s string) bool { return len(b) >= off+len(s) && string(b[off:off+len(s)]) == s }
	switch {
	case has(0, "FORM"):
		return "AIFF audio"
	case has(0, "RIFF"):
		return "a RIFF file that is not WAVE"
	}
	return "this format"
}

// parseHeader walks the RIFF chunks of a WAV file with ReadAt until it has
// the fmt and data chunks; it never reads the samples.
func parseHeader(src backends.Blob) (*stream, error) {
	size := src.Size()
	h := &stream{stated: -1}
	var haveFmt, haveData bool
	var blockA int
	var hdr [8]byte
	off := int64(12)
	for chunks := 0; off+8 <= size && !(haveFmt && haveData); chunks++ {
		if chunks >= maxRIFFChunks {
			return nil, invalid("more than %d RIFF chunks before the audio", maxRIFFChunks)
		}
		if _, err := src.ReadAt(hdr[:], off); err != nil {
			return nil, fmt.Errorf("audio: reading the upload: %w", err)
		}
		id := string(hdr[0:4])
		sz := int64(binary.LittleEndian.Uint32(hdr[4:]))
		avail := size - off - 8
		switch {
		case id == "data" && !haveData:
			haveData = true
			h.dataOff, h.dataLen = off+8, min(sz, avail)
			if sz < unknownSize {
				h.stated = sz
			}
		case sz > avail:
			return nil, invalid("chunk %q overruns the file", id)
		case id == "fmt " && !haveFmt:
			if sz < 16 {
				return nil, invalid("fmt chunk too short (%d bytes)", sz)
			}
			body := make([]byte, min(sz, 26))
			if _, err := src.ReadAt(body, off+8); err != nil {
				return nil, fmt.Errorf("audio: reading the upload: %w", err)
			}
			h.format = int(binary.LittleEndian.Uint16(body[0:]))
			h.channels = int(binary.LittleEndian.Uint16(body[2:]))
			h.rate = int(binary.LittleEndian.Uint32(body[4:]))
			blockA = int(binary.LittleEndian.Uint16(body[12:]))
			h.bits = int(binary.LittleEndian.Uint16(body[14:]))
			if h.format == formatExtensible {
				if sz < 26 {
					return nil, invalid("extensible fmt chunk too short (%d bytes)", sz)
				}
				h.format = int(binary.LittleEndian.Uint16(body[24:]))
			}
			haveFmt = true
		}
		off += 8 + sz + sz%2
	}
	switch {
	case !haveFmt:
		return nil, invalid("no fmt chunk")
	case !haveData:
		return nil, invalid("no data chunk")
	case h.channels < 1 || h.channels > MaxChannels:
		return nil, invalid("%d channels (1..%d supported)", h.channels, MaxChannels)
	}
	if err := checkRate(h.rate); err != nil {
		return nil, err
	}
	if err := checkUpload("the WAV file", h.channels, h.rate); err != nil {
		return nil, err
	}
	switch {
	case h.format == formatPCM && (h.bits == 8 || h.bits == 16 || h.bits == 24 || h.bits == 32):
	case h.format == formatFloat && h.bits == 32:
	default:
		return nil, invalid("unsupported encoding (format %d, %d bits): PCM 8/16/24/32-bit or float32 only", h.format, h.bits)
	}
	if frame := int(h.frame()); blockA != 0 && blockA != frame {
		return nil, invalid("block align %d does not match %d channels of %d bits", blockA, h.channels, h.bits)
	}
	return h, nil
}

// decode reads the data chunk in decodeChunk pieces, averaging channels to
// mono and resampling to rate as it goes. It stops when ctx ends (between
// pieces) and at the end of what the file holds.
func (h *stream) decode(ctx context.Context, src io.ReaderAt, rate int) ([]int16, error) {
	frame := h.frame()
	frames := h.dataLen / frame
	rs := NewResampler(h.rate, rate)
	out := make([]int16, 0, rs.OutLen(frames))
	per := max(1, decodeChunk/frame)
	buf := make([]byte, per*frame)
	mono := make([]int16, per)
	bytesPer := h.bits / 8
	for done := int64(0); done < frames; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("audio: decoding stopped: %w", err)
		}
		n := min(per, frames-done)
		got, err := src.ReadAt(buf[:n*frame], h.dataOff+done*frame)
		if int64(got) < n*frame {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("audio: reading the upload: %w", err)
			}
			n = int64(got) / frame // shorter than its Size: take what is there
			frames = done + n
		}
		b := buf[:n*frame]
		m := mono[:n]
		if h.format == formatPCM && h.bits == 16 && h.channels == 1 {
			for i := range m {
				m[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
			}
		} else {
			for i := range m {
				var sum float64
				for c := range h.channels {
					sum += sample(b[int64(i)*frame+int64(c*bytesPer):], h.format, h.bits)
				}
				m[i] = toPCM16(sum / float64(h.channels))
			}
		}
		out = rs.Write(m, out)
		done += n
	}
	return rs.Flush(out), nil
}

// decodeAll decodes an in-memory payload at its own rate, without a
// duration limit (ParseWAV, Decode: the bytes are already in memory).
func decodeAll(b []byte, rawRate int) (Audio, error) {
	src := bytes.NewReader(b)
	switch c, name := formatOf(src, rawRate); {
	case c != 0:
		return decodeContainer(context.Background(), src, c, name, 0, 0)
	case name != "":
		return decodeCodec(context.Background(), src, name, 0, 0)
	}
	h, err := probe(src, rawRate)
	if err != nil {
		return Audio{}, err
	}
	s, err := h.decode(context.Background(), src, h.rate)
	if err != nil {
		return Audio{}, err
	}
	return Audio{Rate: h.rate, Samples: s}, nil
}
