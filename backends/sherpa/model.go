package sherpa

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
)

// model is the library object of one pool, shared by its slots: an
// OfflineTts or an Offline/OnlineRecognizer. sherpa-onnx's generate and
// decode calls are const on these objects and ONNX Runtime's Run is safe
// for concurrent calls on one session, so slots share the weights and
// each call (on its slot's goroutine) computes on its own threads: with
// threads = 1 ONNX Runtime runs on the calling thread. Per-request objects
// (streams, generated audio) belong to the call. The object is destroyed
// when the last session closes.
type model struct {
	lib  *lib
	cfg  config
	ptr  uintptr
	ex   uintptr // diarization: the speaker embedding extractor (known speakers, embeddings)
	kind string  // "tts", "offline", "online", "diarization"

	mu   sync.Mutex
	refs int
}

// create makes the library object for c (in this process).
func create(l *lib, c config) (*model, error) {
	var cs cstrings
	defer cs.free()
	m := &model{lib: l, cfg: c, refs: 1}
	// The library reads the process's copy of the espeak-ng data, never a
	// checkpoint's folder, which may be deleted under it (espeakdata.go).
	espeak := ""
	if c.fam.task == "tts" && c.files["data_dir"] != "" {
		d, err := espeakDir(c.files["data_dir"])
		if err != nil {
			return nil, err
		}
		espeak = d
	}
	switch c.fam.name {
	case FamilyVITS:
		cfg := cAlloc[ttsConfig]()
		defer freeC(unsafe.Pointer(cfg))
		cfg.Model.Vits = ttsVits{
			Model: cs.of(c.files["model"]), Tokens: cs.of(c.files["tokens"]), DataDir: cs.of(espeak),
			NoiseScale: float32(c.opts.NoiseScale), NoiseScaleW: float32(c.opts.NoiseScaleW), LengthScale: float32(c.opts.LengthScale),
		}
		cfg.Model.NumThreads = int32(c.opts.Threads)
		cfg.Model.Provider = cs.of("cpu")
		cfg.MaxNumSentences = 1 // one callback per sentence (stream_format)
		cfg.SilenceScale = 1
		m.kind, m.ptr = "tts", l.createTTS(unsafe.Pointer(cfg))
	case FamilyMatcha:
		cfg := cAlloc[ttsConfig]()
		defer freeC(unsafe.Pointer(cfg))
		cfg.Model.Matcha = ttsMatcha{
			AcousticModel: cs.of(c.files["acoustic_model"]), Vocoder: cs.of(c.files["vocoder"]), Tokens: cs.of(c.files["tokens"]),
			DataDir: cs.of(espeak), NoiseScale: float32(c.opts.NoiseScale), LengthScale: float32(c.opts.LengthScale),
		}
		cfg.Model.NumThreads = int32(c.opts.Threads)
		cfg.Model.Provider = cs.of("cpu")
		cfg.MaxNumSentences = 1
		cfg.SilenceScale = 1
		m.kind, m.ptr = "tts", l.createTTS(unsafe.Pointer(cfg))
	case FamilyKokoro:
		cfg := cAlloc[ttsConfig]()
		defer freeC(unsafe.Pointer(cfg))
		cfg.Model.Kokoro = ttsKokoro{
			Model: cs.of(c.files["model"]), Voices: cs.of(c.files["voices"]), Tokens: cs.of(c.files["tokens"]),
			DataDir: cs.of(espeak), LengthScale: float32(c.opts.LengthScale),
			Lexicon: cs.of(c.files["lexicon"]), Lang: cs.of(c.opts.Lang),
		}
		cfg.Model.NumThreads = int32(c.opts.Threads)
		cfg.Model.Provider = cs.of("cpu")
		cfg.MaxNumSentences = 1
		cfg.SilenceScale = 1
		m.kind, m.ptr = "tts", l.createTTS(unsafe.Pointer(cfg))
	case FamilyKitten:
		cfg := cAlloc[ttsConfig]()
		defer freeC(unsafe.Pointer(cfg))
		cfg.Model.Kitten = ttsKitten{
			Model: cs.of(c.files["model"]), Voices: cs.of(c.files["voices"]), Tokens: cs.of(c.files["tokens"]),
			DataDir: cs.of(espeak), LengthScale: float32(c.opts.LengthScale),
		}
		cfg.Model.NumThreads = int32(c.opts.Threads)
		cfg.Model.Provider = cs.of("cpu")
		cfg.MaxNumSentences = 1
		cfg.SilenceScale = 1
		m.kind, m.ptr = "tts", l.createTTS(unsafe.Pointer(cfg))
	case FamilyNemoCTC, FamilyTransducer, FamilyNemoTransducer, FamilySenseVoice, FamilyParaformer, FamilyWhisper, FamilyMoonshine, FamilyMoonshineV2, FamilyCanary:
		cfg := cAlloc[offRecognizerConfig]()
		defer freeC(unsafe.Pointer(cfg))
		cfg.Feat = featureConfig{SampleRate: 16000, FeatureDim: 80}
		mc := &cfg.Model
		mc.Tokens = cs.of(c.files["tokens"])
		mc.NumThreads = int32(c.opts.Threads)
		mc.Provider = cs.of("cpu")
		mc.ModelType = cs.of(c.opts.ModelType)
		switch c.fam.name {
		case FamilyNemoCTC:
			mc.NemoCtc.Model = cs.of(c.files["model"])
		case FamilyParaformer:
			mc.Paraformer.Model = cs.of(c.files["model"])
		case FamilyNemoTransducer:
			mc.Transducer = offTransducer{Encoder: cs.of(c.files["encoder"]), Decoder: cs.of(c.files["decoder"]), Joiner: cs.of(c.files["joiner"])}
			mc.ModelType = cs.of("nemo_transducer")
			if f := metaInt(c.infos["encoder"], "feat_dim"); f > 0 {
				cfg.Feat.FeatureDim = int32(f)
			}
		case FamilyCanary:
			mc.Canary = offCanary{Encoder: cs.of(c.files["encoder"]), Decoder: cs.of(c.files["decoder"]),
				SrcLang: cs.of(c.opts.Language), TgtLang: cs.of(c.opts.Language), UsePnc: 1}
			cfg.Feat.FeatureDim = int32(metaInt(c.infos["encoder"], "feat_dim"))
		case FamilyMoonshine:
			mc.Moonshine = offMoonshine{Preprocessor: cs.of(c.files["preprocessor"]), Encoder: cs.of(c.files["encoder"]),
				UncachedDecoder: cs.of(c.files["uncached_decoder"]), CachedDecoder: cs.of(c.files["cached_decoder"])}
		case FamilyMoonshineV2:
			mc.Moonshine = offMoonshine{Encoder: cs.of(c.files["encoder"]), MergedDecoder: cs.of(c.files["merged_decoder"])}
		case FamilyWhisper:
			lang := c.opts.Language
			if lang == "auto" {
				lang = ""
			}
			mc.Whisper = offWhisper{Encoder: cs.of(c.files["encoder"]), Decoder: cs.of(c.files["decoder"]), Language: cs.of(lang), Task: cs.of("transcribe"), TailPaddings: -1}
			cfg.Feat.FeatureDim = int32(metaInt(c.infos["encoder"], "n_mels"))
		case FamilySenseVoice:
			mc.SenseVoice = offSenseVoice{Model: cs.of(c.files["model"]), Language: cs.of(c.opts.Language)}
		default:
			mc.Transducer = offTransducer{Encoder: cs.of(c.files["encoder"]), Decoder: cs.of(c.files["decoder"]), Joiner: cs.of(c.files["joiner"])}
		}
		cfg.DecodingMethod = cs.of(c.opts.DecodingMethod)
		cfg.MaxActivePaths = 4
		cfg.HotwordsScore = float32(c.opts.HotwordsScore)
		if c.opts.DecodingMethod == beamSearch {
			mc.ModelingUnit, mc.BpeVocab = cs.of(c.unit), cs.of(c.files["bpe_vocab"])
		}
		m.kind, m.ptr = "offline", l.createOffRec(unsafe.Pointer(cfg))
	case FamilyDiarization:
		cfg := c.diarizationConfig(&cs, 0)
		defer freeC(unsafe.Pointer(cfg))
		m.kind, m.ptr = "diarization", l.createSD(unsafe.Pointer(cfg))
		if m.ptr != 0 {
			if m.ex = l.createEx(unsafe.Pointer(&cfg.Embedding)); m.ex == 0 {
				l.destroySD(m.ptr)
				m.ptr = 0
			}
		}
	case FamilyOnlineTransducer, FamilyOnlineNemoCTC, FamilyOnlineParaformer:
		cfg := cAlloc[onRecognizerConfig]()
		defer freeC(unsafe.Pointer(cfg))
		cfg.Feat = featureConfig{SampleRate: 16000, FeatureDim: 80}
		mc := &cfg.Model
		switch c.fam.name {
		case FamilyOnlineNemoCTC:
			mc.NemoCtc.Model = cs.of(c.files["model"])
		case FamilyOnlineParaformer:
			mc.Paraformer = onParaformer{Encoder: cs.of(c.files["encoder"]), Decoder: cs.of(c.files["decoder"])}
		default:
			mc.Transducer = offTransducer{Encoder: cs.of(c.files["encoder"]), Decoder: cs.of(c.files["decoder"]), Joiner: cs.of(c.files["joiner"])}
		}
		mc.Tokens = cs.of(c.files["tokens"])
		mc.NumThreads = int32(c.opts.Threads)
		mc.Provider = cs.of("cpu")
		cfg.DecodingMethod = cs.of(c.opts.DecodingMethod)
		cfg.MaxActivePaths = 4
		cfg.HotwordsScore = float32(c.opts.HotwordsScore)
		if c.opts.DecodingMethod == beamSearch {
			mc.ModelingUnit, mc.BpeVocab = cs.of(c.unit), cs.of(c.files["bpe_vocab"])
		}
		// Endpoint detection (the library's default rules) segments an
		// upload (upload.go); a live session's turns end at its commits
		// and never ask the endpoint.
		cfg.EnableEndpoint = 1
		m.kind, m.ptr = "online", l.createOnRec(unsafe.Pointer(cfg))
	default:
		return nil, fmt.Errorf("sherpa: family %s has no loader", c.fam.name)
	}
	if m.ptr == 0 {
		return nil, backends.Invalidf("sherpa: the library refused checkpoint %s (family %s)", c.name, c.fam.name)
	}
	return m, nil
}

func freeC(p unsafe.Pointer) { freeMem(p) }

func (m *model) acquire() {
	m.mu.Lock()
	m.refs++
	m.mu.Unlock()
}

func (m *model) release() {
	m.mu.Lock()
	m.refs--
	last := m.refs == 0
	m.mu.Unlock()
	if !last {
		return
	}
	switch m.kind {
	case "tts":
		m.lib.destroyTTS(m.ptr)
	case "offline":
		m.lib.destroyOffRec(m.ptr)
	case "online":
		m.lib.destroyOnRec(m.ptr)
	case "diarization":
		m.lib.destroySD(m.ptr)
		m.lib.destroyEx(m.ex)
	}
	m.ptr = 0
}

// Open implements backends.Engine: the checks of resolve, then a load in
// a child process (once per checkpoint and options), then the load here.
func (e *Engine) Open(ctx context.Context, spec backends.Spec) (backends.Session, int, error) {
	c, err := e.resolve(spec)
	if err != nil {
		return nil, 0, err
	}
	l, err := load()
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if !e.cfg.NoChild {
		if err := childCheck(ctx, spec, c); err != nil {
			return nil, 0, err
		}
	}
	m, err := create(l, c)
	if err != nil {
		return nil, 0, err
	}
	return &session{m: m}, c.capacity, nil
}

// session is one slot: the shared model and the slot's own state.
type session struct {
	m      *model
	closed bool
	langs  langCache // recognizers for other languages (langs.go)
}

// Clone implements backends.Session: the slot shares the model.
func (s *session) Clone(ctx context.Context, index int) (backends.Session, error) {
	if s.closed {
		return nil, fmt.Errorf("sherpa: session is closed")
	}
	if s.m.cfg.fam.perSlot {
		m, err := create(s.m.lib, s.m.cfg)
		if err != nil {
			return nil, err
		}
		return &session{m: m}, nil
	}
	s.m.acquire()
	return &session{m: s.m}, nil
}

// Close implements backends.Session.
func (s *session) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.closeLangs()
	s.m.release()
	return nil
}

// Infer implements backends.Session.
func (s *session) Infer(ctx context.Context, req backends.Request, emit backends.Emit) (backends.Output, error) {
	if s.closed {
		return backends.Output{}, fmt.Errorf("sherpa: session is closed")
	}
	if err := ctx.Err(); err != nil {
		return backends.Output{}, err
	}
	if req.Live != nil && s.m.kind != "online" {
		return backends.Output{}, backends.Invalidf("sherpa: %s is not a streaming model (family %s): live sessions need a streaming family (%s, %s or %s)", s.m.cfg.name, s.m.cfg.fam.name, FamilyOnlineTransducer, FamilyOnlineNemoCTC, FamilyOnlineParaformer)
	}
	switch s.m.kind {
	case "tts":
		return s.m.speak(ctx, req, emit)
	case "offline":
		return s.m.transcribe(ctx, req, s.recognizer)
	case "diarization":
		return s.m.diarize(ctx, req)
	case "online":
		if req.Live == nil {
			return s.m.transcribeStreaming(ctx, req, emit)
		}
		return s.m.live(ctx, req, emit)
	}
	return backends.Output{}, fmt.Errorf("sherpa: unknown model kind %q", s.m.kind)
}
