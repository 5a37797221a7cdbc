// Package av binds Sluice's shim over Debian's FFmpeg libraries
// (libavformat59, libavcodec59, libswresample4: FFmpeg 5.1) with purego:
// WebM/Matroska and MP4/M4A uploads are demuxed from an io.ReaderAt and
// their Opus, Vorbis or AAC track decoded to mono PCM16, and PCM16 is
// encoded (AAC in ADTS or M4A, and for tests Opus or Vorbis in WebM).
//
// Only two demuxers are ever used, named by the caller from the file's
// first bytes (never probed), and only three decoders, named by the
// codec the header states: FFmpeg's other formats are not reachable from
// an upload. The header's codec, channels, rate and duration are reported
// (Info) before any packet is decoded; each Next decodes at most one
// packet, so the caller bounds the work and checks its context between
// calls, and a context's end also interrupts the demuxer.
//
// Threading rule: a Decoder is not safe for concurrent use; any number of
// Decoders and Encode calls may run concurrently.
package av

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// The shim's sources and build script are embedded so that the loader
// computes the same folder name as shim/build.sh (the hash of the three).
var (
	//go:embed shim/av.c
	shimAV []byte
	//go:embed shim/enc.c
	shimEnc []byte
	//go:embed shim/build.sh
	shimScript []byte
)

// ErrUnavailable wraps native.ErrUnavailable: the shim or FFmpeg's
// libraries are not installed (`make deps`).
var ErrUnavailable = native.ErrUnavailable

// Errors a decode fails with, by what was wrong with the file.
var (
	// ErrDamaged: the container or the audio cannot be read (truncated,
	// malformed, undecodable).
	ErrDamaged = errors.New("damaged")
	// ErrNoAudio: the file has no audio track (video only, ...).
	ErrNoAudio = errors.New("no audio track")
	// ErrCodec: the audio track's codec is not one decoded here.
	ErrCodec = errors.New("codec not supported")
	// ErrBounds: decoded frames are beyond the caller's Bounds.
	ErrBounds = errors.New("beyond the bounds")
)

// BuildID returns the shim's build folder name: the first 12 hex digits
// of the SHA-256 of shim/av.c, shim/enc.c and shim/build.sh.
func BuildID() string { return native.SourceHash(shimAV, shimEnc, shimScript) }

// Libraries returns where the shim may be, in the order tried:
// SLUICE_AV_SHIM_LIB alone when it is set, else
// .deps/av-shim/<BuildID>/libsluice_av.so under the module root (`make
// deps` builds it there), then beside the npm prefix (SLUICE_NPM_PREFIX's
// parent, where make deps puts .deps/npm).
func Libraries() []string {
	if p := os.Getenv("SLUICE_AV_SHIM_LIB"); p != "" {
		return []string{p}
	}
	rel := filepath.Join("av-shim", BuildID(), "libsluice_av.so")
	var paths []string
	if root := native.ModuleRoot(); root != "" {
		paths = append(paths, filepath.Join(root, ".deps", rel))
	} else {
		paths = append(paths, filepath.Join(".deps", rel))
	}
	if p := os.Getenv("SLUICE_NPM_PREFIX"); p != "" {
		if q := filepath.Join(filepath.Dir(p), rel); q != paths[0] {
			paths = append(paths, q)
		}
	}
	return paths
}

var (
	avABI      func() int32
	avEncABI   func() int32
	avInit     func()
	avOpen     func(rd uintptr, user uint64, size int64, demuxer int32) unsafe.Pointer
	avStart    func(d unsafe.Pointer, outRate, maxChannels, maxRate, maxTotal int32) int32
	avNext     func(d unsafe.Pointer) int64
	avClose    func(d unsafe.Pointer)
	avEncOpen  func(muxer, encoder unsafe.Pointer, rate, channels int32, bitrate, limit int64, streamable int32, opts unsafe.Pointer) unsafe.Pointer
	avEncWrite func(e unsafe.Pointer, pcm unsafe.Pointer, frames int64) int32
	avEncEnd   func(e unsafe.Pointer) int32
	avEncClose func(e unsafe.Pointer)

	loadOnce sync.Once
	loadErr  error
	readCB   uintptr

	sources sync.Map // uint64 -> *source
	nextID  atomic.Uint64
)

// Load opens the shim once; the error wraps ErrUnavailable when it (or
// FFmpeg's libraries) is missing.
func Load() error {
	loadOnce.Do(func() {
		paths := Libraries()
		h, err := native.Open("build it with `make deps` (backends/audio/av/shim/build.sh, Debian's libavformat-dev, libavcodec-dev, libswresample-dev), or set SLUICE_AV_SHIM_LIB", paths...)
		if err == nil {
			err = native.Bind(h, &avABI, "sluice_av_abi", &avEncABI, "sluice_av_enc_abi", &avInit, "sluice_av_init",
				&avOpen, "sluice_av_open", &avStart, "sluice_av_start", &avNext, "sluice_av_next", &avClose, "sluice_av_close",
				&avEncOpen, "sluice_av_enc_open", &avEncWrite, "sluice_av_enc_write", &avEncEnd, "sluice_av_enc_finish", &avEncClose, "sluice_av_enc_close")
		}
		if err == nil && (avABI() != int32(unsafe.Sizeof(decPub{})) || avEncABI() != int32(unsafe.Sizeof(encPub{}))) {
			err = fmt.Errorf("%s is not this build's shim (its structs differ): rebuild with make deps", strings.Join(paths, " or "))
		}
		if err != nil {
			loadErr = fmt.Errorf("av: %w", err)
			return
		}
		avInit()
		readCB = purego.NewCallback(cbRead)
	})
	return loadErr
}

// source is what one decoder reads.
type source struct {
	ctx context.Context
	src io.ReaderAt
	err error // the first failing read, or the context's end
}

// cbRead is the shim's pread: up to n bytes at off into C memory at buf;
// 0 at the end, -1 when the source fails.
func cbRead(user uint64, buf uintptr, n, off int64) int64 {
	v, ok := sources.Load(user)
	if !ok || n <= 0 {
		return -1
	}
	s := v.(*source)
	if s.err != nil {
		return -1
	}
	if err := s.ctx.Err(); err != nil {
		s.err = fmt.Errorf("av: reading stopped: %w", err)
		return -1
	}
	got, err := s.src.ReadAt(unsafe.Slice((*byte)(native.Ptr(buf)), n), off)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = fmt.Errorf("av: reading the upload: %w", err)
		return -1
	}
	return int64(got)
}

// decPub mirrors struct sluice_av_pub (shim/av.c).
type decPub struct {
	kind, codec, channels, rate int32
	durationUS                  int64
	audioTracks, stop, eof      int32
	outChannels, outInRate, _   int32
	out                         unsafe.Pointer
	outLen, packets             int64
	streams, trackDuration      int32
	codecName                   [32]byte
	err                         [256]byte
}

// encPub mirrors struct sluice_av_enc_pub (shim/enc.c).
type encPub struct {
	failed, _ int32
	data      unsafe.Pointer
	size      int64
	err       [256]byte
}

func cstr(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
