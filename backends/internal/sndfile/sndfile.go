// Package sndfile binds Debian's libsndfile1 (1.2) with purego: decoding
// and encoding of FLAC, Ogg (Vorbis, Opus), MPEG layer III and WAV through
// libsndfile's virtual I/O API (sf_open_virtual), so uploads are read from
// their io.ReaderAt in the pieces libsndfile asks for and outputs are
// written to bounded memory, never through a temporary file.
//
// The five virtual I/O callbacks are created once per process (purego
// callbacks are never freed) and find their stream through the user_data
// word, a handle into a registry.
//
// Threading rule: Readers and writers are not safe for concurrent use; any
// number of them may be used concurrently from different goroutines
// (libsndfile keeps no shared state per handle).
package sndfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Major formats and subtypes (sndfile.h).
const (
	FormatWAV  = 0x010000
	FormatFLAC = 0x170000
	FormatOGG  = 0x200000
	FormatMPEG = 0x230000

	SubPCM16  = 0x0002
	SubVorbis = 0x0060
	SubOpus   = 0x0064
	SubMP3    = 0x0082

	formatTypeMask = 0x0FFF0000

	modeRead  = 0x10
	modeWrite = 0x20

	// CountMax is the frame count libsndfile reports when it does not know
	// the length (SF_COUNT_MAX).
	CountMax = 0x7FFFFFFFFFFFFFFF

	infoSize = 32 // sizeof(SF_INFO) on LP64
)

// ErrUnavailable wraps native.ErrUnavailable: libsndfile1 is not installed.
var ErrUnavailable = native.ErrUnavailable

var (
	sfOpenVirtual func(vio unsafe.Pointer, mode int32, info unsafe.Pointer, user uintptr) uintptr
	sfReadfShort  func(h uintptr, ptr unsafe.Pointer, frames int64) int64
	sfWritefShort func(h uintptr, ptr unsafe.Pointer, frames int64) int64
	sfClose       func(h uintptr) int32
	sfStrerror    func(h uintptr) unsafe.Pointer
	sfFormatCheck func(info unsafe.Pointer) int32
	sfError       func(h uintptr) int32

	loadOnce sync.Once
	loadErr  error
	vioTable unsafe.Pointer // SF_VIRTUAL_IO in C memory, shared by every stream

	streams sync.Map // uintptr handle -> *vstream
	nextID  atomic.Uintptr
)

// Load opens libsndfile once; the error wraps ErrUnavailable when it is
// not installed.
func Load() error {
	loadOnce.Do(func() {
		h, err := native.Open("Debian package libsndfile1", "libsndfile.so.1")
		if err == nil {
			err = native.Bind(h,
				&sfOpenVirtual, "sf_open_virtual",
				&sfReadfShort, "sf_readf_short",
				&sfWritefShort, "sf_writef_short",
				&sfClose, "sf_close",
				&sfStrerror, "sf_strerror",
				&sfFormatCheck, "sf_format_check",
				&sfError, "sf_error")
		}
		if err == nil {
			if qerr := quietMPG123(h); qerr != nil {
				slog.Warn("sndfile: mpg123's messages on damaged MP3 frames stay on stderr", "err", qerr)
			}
		}
		if err != nil {
			loadErr = fmt.Errorf("sndfile: %w", err)
			return
		}
		t := native.Malloc(5 * 8)
		slots := unsafe.Slice((*uintptr)(t), 5)
		slots[0] = purego.NewCallback(cbFilelen)
		slots[1] = purego.NewCallback(cbSeek)
		slots[2] = purego.NewCallback(cbRead)
		slots[3] = purego.NewCallback(cbWrite)
		slots[4] = purego.NewCallback(cbTell)
		vioTable = t
	})
	return loadErr
}

// vstream is the state behind one virtual I/O handle: a source to read
// (src, size) or a bounded buffer to write (buf, limit).
type vstream struct {
	ctx   context.Context
	src   io.ReaderAt
	size  int64
	pos   int64
	buf   []byte
	limit int64
	err   error // the first read or write failure, reported by the caller
}

func lookup(user uintptr) *vstream {
	v, ok := streams.Load(user)
	if !ok {
		return nil
	}
	return v.(*vstream)
}

func (v *vstream) length() int64 {
	if v.src != nil {
		return v.size
	}
	return int64(len(v.buf))
}

func cbFilelen(user uintptr) int64 {
	v := lookup(user)
	if v == nil {
		return -1
	}
	return v.length()
}

func cbSeek(off int64, whence int32, user uintptr) int64 {
	v := lookup(user)
	if v == nil {
		return -1
	}
	var p int64
	switch whence {
	case io.SeekStart:
		p = off
	case io.SeekCurrent:
		p = v.pos + off
	case io.SeekEnd:
		p = v.length() + off
	default:
		return -1
	}
	if p < 0 || (v.src == nil && p > v.limit) {
		return -1
	}
	v.pos = p
	return p
}

func cbTell(user uintptr) int64 {
	v := lookup(user)
	if v == nil {
		return -1
	}
	return v.pos
}

// cbRead copies up to count bytes at the stream's position into C memory
// at ptr. A cancelled context or a failing source reads as end of file and
// records the error.
func cbRead(ptr uintptr, count int64, user uintptr) int64 {
	v := lookup(user)
	if v == nil || v.src == nil || count <= 0 || v.err != nil {
		return 0
	}
	if err := v.ctx.Err(); err != nil {
		v.err = err
		return 0
	}
	n := min(count, v.size-v.pos)
	if n <= 0 {
		return 0
	}
	got, err := v.src.ReadAt(unsafe.Slice((*byte)(native.Ptr(ptr)), n), v.pos)
	if err != nil && !errors.Is(err, io.EOF) {
		v.err = fmt.Errorf("sndfile: reading the source: %w", err)
	}
	v.pos += int64(got)
	return int64(got)
}

// cbWrite stores count bytes from ptr at the position, growing the buffer
// up to its limit; past the limit it writes nothing (libsndfile then fails
// the write) and records the error.
func cbWrite(ptr uintptr, count int64, user uintptr) int64 {
	v := lookup(user)
	if v == nil || v.src != nil || count < 0 || v.err != nil {
		return 0
	}
	end := v.pos + count
	if end > v.limit {
		v.err = fmt.Errorf("sndfile: encoded output exceeds %d bytes", v.limit)
		return 0
	}
	if end > int64(len(v.buf)) {
		if end > int64(cap(v.buf)) {
			nb := make([]byte, end, max(end, 2*int64(cap(v.buf))))
			copy(nb, v.buf)
			v.buf = nb
		}
		v.buf = v.buf[:end]
	}
	copy(v.buf[v.pos:end], unsafe.Slice((*byte)(native.Ptr(ptr)), count))
	v.pos = end
	return count
}

func register(v *vstream) uintptr {
	id := nextID.Add(1)
	streams.Store(id, v)
	return id
}

// Info is what a file's header states.
type Info struct {
	Frames   int64 // CountMax (or an estimate, for MPEG) when unknown
	Rate     int
	Channels int
	Format   int // major format | subtype
}

// Major returns the major format (FormatFLAC, ...).
func (i Info) Major() int { return i.Format & formatTypeMask }

// chunkFrames is the number of frames moved through C memory per call.
const chunkFrames = 4096

// Reader decodes a file read through virtual I/O.
type Reader struct {
	h    uintptr
	id   uintptr
	v    *vstream
	info Info
	cbuf unsafe.Pointer // chunkFrames*channels shorts
}

// Open parses the header of the size-byte file src (libsndfile detects
// the format from the content). ctx bounds every read; the Reader must be
// closed.
func Open(ctx context.Context, src io.ReaderAt, size int64) (*Reader, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	v := &vstream{ctx: ctx, src: src, size: size}
	id := register(v)
	info := native.Malloc(infoSize)
	defer native.Free(info)
	h := sfOpenVirtual(vioTable, modeRead, info, id)
	if h == 0 {
		streams.Delete(id)
		if v.err != nil {
			return nil, v.err
		}
		return nil, fmt.Errorf("sndfile: %s", native.GoString(sfStrerror(0)))
	}
	r := &Reader{h: h, id: id, v: v, info: Info{
		Frames:   *(*int64)(info),
		Rate:     int(native.Int32(info, 8)),
		Channels: int(native.Int32(info, 12)),
		Format:   int(native.Int32(info, 16)),
	}}
	if r.info.Channels < 1 || r.info.Channels > 1024 {
		r.Close()
		return nil, fmt.Errorf("sndfile: %d channels", r.info.Channels)
	}
	r.cbuf = native.Malloc(chunkFrames * r.info.Channels * 2)
	return r, nil
}

// Info returns the header's description.
func (r *Reader) Info() Info { return r.info }

// Read decodes up to chunkFrames frames of interleaved PCM16 into dst
// (grown as needed) and returns it; an empty result is the end. A
// cancelled context or failing source is returned as an error.
func (r *Reader) Read(dst []int16) ([]int16, error) {
	n := sfReadfShort(r.h, r.cbuf, chunkFrames)
	if r.v.err != nil {
		return dst[:0], r.v.err
	}
	if n <= 0 {
		if sfError(r.h) != 0 {
			return dst[:0], fmt.Errorf("sndfile: decoding: %s", native.GoString(sfStrerror(r.h)))
		}
		return dst[:0], nil
	}
	m := int(n) * r.info.Channels
	dst = append(dst[:0], unsafe.Slice((*int16)(r.cbuf), m)...)
	return dst, nil
}

// Close releases the handle.
func (r *Reader) Close() {
	if r.h != 0 {
		sfClose(r.h)
		r.h = 0
	}
	streams.Delete(r.id)
	native.Free(r.cbuf)
	r.cbuf = nil
}

// Encode writes mono PCM16 samples at rate as format (major | subtype)
// into memory, refusing output past limit bytes, and stops between chunks
// when ctx ends. The format must be one libsndfile can write at rate.
// It is an Encoder fed the samples at once.
func Encode(ctx context.Context, samples []int16, rate, format int, limit int64) ([]byte, error) {
	e, err := NewEncoder(ctx, rate, format, limit, int64(len(samples))+4096)
	if err != nil {
		return nil, err
	}
	if err := e.Write(samples); err != nil {
		e.Abort()
		return nil, err
	}
	return e.Close()
}

// Encoder writes mono PCM16 fed in pieces (Write) into memory as one
// file: the bytes are Encode's for the concatenated samples (libsndfile's
// codecs buffer to their own frames, so the pieces' boundaries change
// nothing). It holds the encoded output and the codec's state, never the
// PCM. Not safe for concurrent use; Close or Abort frees it.
type Encoder struct {
	ctx    context.Context
	format int
	v      *vstream
	id     uintptr
	h      uintptr
	cbuf   unsafe.Pointer // chunkFrames shorts
}

// NewEncoder opens an encoder of format at rate whose output may not pass
// limit bytes (SetLimit raises it), its buffer sized for hint bytes.
func NewEncoder(ctx context.Context, rate, format int, limit, hint int64) (*Encoder, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	info := native.Malloc(infoSize)
	defer native.Free(info)
	*(*int32)(unsafe.Add(info, 8)) = int32(rate)
	*(*int32)(unsafe.Add(info, 12)) = 1
	*(*int32)(unsafe.Add(info, 16)) = int32(format)
	if sfFormatCheck(info) == 0 {
		return nil, fmt.Errorf("sndfile: format 0x%x at %d Hz cannot be written", format, rate)
	}
	e := &Encoder{ctx: ctx, format: format, v: &vstream{ctx: ctx, limit: limit, buf: make([]byte, 0, max(0, min(limit, hint)))}}
	e.id = register(e.v)
	e.h = sfOpenVirtual(vioTable, modeWrite, info, e.id)
	if e.h == 0 {
		streams.Delete(e.id)
		if e.v.err != nil {
			return nil, e.v.err
		}
		return nil, fmt.Errorf("sndfile: opening the encoder: %s", native.GoString(sfStrerror(0)))
	}
	e.cbuf = native.Malloc(chunkFrames * 2)
	return e, nil
}

// SetLimit sets the most bytes the output may reach.
func (e *Encoder) SetLimit(limit int64) { e.v.limit = limit }

// Write encodes samples, checking ctx between chunks. After an error the
// encoder is only to be Aborted.
func (e *Encoder) Write(samples []int16) error {
	c := unsafe.Slice((*int16)(e.cbuf), chunkFrames)
	for done := 0; done < len(samples); {
		if err := e.ctx.Err(); err != nil {
			return fmt.Errorf("sndfile: encoding stopped: %w", err)
		}
		n := copy(c, samples[done:])
		if w := sfWritefShort(e.h, e.cbuf, int64(n)); w != int64(n) {
			if e.v.err != nil {
				return e.v.err
			}
			return fmt.Errorf("sndfile: encoding: %s", native.GoString(sfStrerror(e.h)))
		}
		done += n
	}
	return nil
}

// Close finishes the file and returns its bytes: the same bytes for the
// same samples (an Ogg file's random serial is replaced, see ogg.go).
func (e *Encoder) Close() ([]byte, error) {
	if e.h == 0 {
		return nil, errors.New("sndfile: encoder already closed")
	}
	rc := sfClose(e.h)
	e.free()
	if rc != 0 || e.v.err != nil {
		if e.v.err != nil {
			return nil, e.v.err
		}
		return nil, fmt.Errorf("sndfile: finishing the file: error %d", rc)
	}
	if e.format&formatTypeMask == FormatOGG {
		fixOggSerials(e.v.buf) // the same bytes for the same samples
	}
	return e.v.buf, nil
}

// Abort frees the encoder without finishing the file; after Close or
// Abort it does nothing.
func (e *Encoder) Abort() {
	if e.h == 0 {
		return
	}
	sfClose(e.h)
	e.free()
}

func (e *Encoder) free() {
	streams.Delete(e.id)
	native.Free(e.cbuf)
	e.cbuf, e.h = nil, 0
}

// mpg123 (libsndfile's MP3 decoder) prints a line to stderr for every
// damaged frame, so a hostile upload could write the server's stderr at
// its will. libsndfile offers no way to pass MPG123_QUIET, so its import
// of mpg123_new is rebound to a wrapper that sets the flag on every new
// handle.
var (
	mpgNew   func(decoder uintptr, errp uintptr) uintptr
	mpgParam func(h uintptr, typ int32, value int64, fvalue float64) int32
)

const (
	mpgAddFlags = 2    // MPG123_ADD_FLAGS
	mpgQuiet    = 0x20 // MPG123_QUIET
)

func quietMPG123(sf uintptr) error {
	m, err := native.Open("Debian package libmpg123-0", "libmpg123.so.0")
	if err != nil {
		return err
	}
	if err := native.Bind(m, &mpgNew, "mpg123_new", &mpgParam, "mpg123_param"); err != nil {
		return err
	}
	wrapper := purego.NewCallback(func(decoder, errp uintptr) uintptr {
		h := mpgNew(decoder, errp)
		if h != 0 {
			mpgParam(h, mpgAddFlags, mpgQuiet, 0)
		}
		return h
	})
	return native.PatchImport(sf, "sf_open_virtual", "mpg123_new", wrapper)
}
