package flite

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// Stopping inside a sentence (CONTRACT.md engine.cancel). flite_text_to_wave
// synthesises a sentence in one native call, which at speed 0.25 takes up
// to seconds for the longest sentence SplitSentences lets through (300
// characters). Flite's audio streaming hook lets the clustergen vocoder
// (cst_mlsa.c) hand over each stretch of samples as it makes them and stop
// when the callback answers CST_AUDIO_STREAM_STOP, with a NULL wave: the
// clustergen voices (slt, awb, rms) get a streaming_info feature whose
// callback checks the request's context every streamChunk samples. It
// changes no sample (the vocoder writes the same wave and only reports
// progress). The kal diphone voices keep stopping between sentences (their
// synthesis is an order of magnitude cheaper).

// streamChunk is how many samples the vocoder makes between two checks:
// 0.1 s at 16 kHz.
const streamChunk = 1600

// Flite's cst_audio_streaming_info (flite 2.2, cst_audio.h, LP64) and its
// callback's answers.
const (
	offASIMinBuffsize = 0  // int min_buffsize
	offASICallback    = 8  // cst_audio_stream_callback asc
	offASIUserdata    = 32 // void *userdata (after utt and item)
	streamCont        = 0  // CST_AUDIO_STREAM_CONT
	streamStop        = -1 // CST_AUDIO_STREAM_STOP
)

// stream is a session's synthesis in progress, reached from the callback
// through the id in userdata. The callback runs on the goroutine that
// called flite_text_to_wave, so its fields need no lock.
type stream struct {
	id     uintptr
	ctx    context.Context // the request being synthesised
	chunks int             // callbacks in this request
}

var (
	streams   sync.Map // uintptr id -> *stream
	streamIDs atomic.Uintptr
	streamCB  uintptr
	cbOnce    sync.Once
)

// chunkHook, when set (tests), is called from the callback with the
// request's count of chunks so far, before the context is checked.
var chunkHook func(chunks int)

// streamCallback is flite's cst_audio_stream_callback.
func streamCallback(w unsafe.Pointer, start, size, last int32, asi unsafe.Pointer) int32 {
	v, ok := streams.Load(*(*uintptr)(unsafe.Add(asi, offASIUserdata)))
	if !ok {
		return streamCont
	}
	st := v.(*stream)
	st.chunks++
	if chunkHook != nil {
		chunkHook(st.chunks)
	}
	if st.ctx != nil && st.ctx.Err() != nil {
		return streamStop
	}
	return streamCont
}

// attachStream gives voice a streaming_info feature whose callback stops
// the vocoder when the session's current request ends, and returns the
// stream (nil for voices without a clustergen vocoder).
func (l *lib) attachStream(name string, voice unsafe.Pointer) *stream {
	if !clustergen[name] {
		return nil
	}
	cbOnce.Do(func() { streamCB = purego.NewCallback(streamCallback) })
	asi := l.newASI()
	if asi == nil {
		return nil
	}
	id := streamIDs.Add(1)
	st := &stream{}
	streams.Store(id, st)
	*(*int32)(unsafe.Add(asi, offASIMinBuffsize)) = streamChunk
	*(*uintptr)(unsafe.Add(asi, offASICallback)) = streamCB
	*(*uintptr)(unsafe.Add(asi, offASIUserdata)) = id
	// The feature value owns asi: delete_voice frees it with the voice.
	l.featSet(native.Ptr(native.Uintptr(voice, offVoiceFeatures)), l.streamName, l.asiVal(asi))
	st.id = id
	return st
}

// begin makes ctx the request the stream's callback checks.
func (st *stream) begin(ctx context.Context) {
	if st != nil {
		st.ctx, st.chunks = ctx, 0
	}
}

// end leaves the stream without a request (the callback lets the
// vocoder go on).
func (st *stream) end() {
	if st != nil {
		st.ctx, st.chunks = nil, 0
	}
}

// close forgets the stream (its voice is being deleted).
func (st *stream) close() {
	if st != nil {
		streams.Delete(st.id)
		st.ctx = nil
	}
}
