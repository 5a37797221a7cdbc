package sherpa

// Go mirrors of the sherpa-onnx C API's config and result structs that this
// package passes to or reads from libsherpa-onnx-c-api.so (version 1.13.8).
// They are written for this package from the layout of c-api.h at that
// version; TestCLayout compiles testdata/capi_layout.h (the same layout,
// declared independently) with gcc and compares every size and field
// offset. A `c` tag names the C field. Strings are C memory (uintptr, see
// cstrings), never Go pointers: the library keeps none of them after the
// create call, but purego's rules forbid Go pointers inside C structs.

type cstr = uintptr // const char *, C memory or 0

// TTS.

type ttsVits struct {
	Model       cstr    `c:"model"`
	Lexicon     cstr    `c:"lexicon"`
	Tokens      cstr    `c:"tokens"`
	DataDir     cstr    `c:"data_dir"`
	NoiseScale  float32 `c:"noise_scale"`
	NoiseScaleW float32 `c:"noise_scale_w"`
	LengthScale float32 `c:"length_scale"`
	DictDir     cstr    `c:"dict_dir"`
}

type ttsMatcha struct {
	AcousticModel cstr    `c:"acoustic_model"`
	Vocoder       cstr    `c:"vocoder"`
	Lexicon       cstr    `c:"lexicon"`
	Tokens        cstr    `c:"tokens"`
	DataDir       cstr    `c:"data_dir"`
	NoiseScale    float32 `c:"noise_scale"`
	LengthScale   float32 `c:"length_scale"`
	DictDir       cstr    `c:"dict_dir"`
}

type ttsKokoro struct {
	Model       cstr    `c:"model"`
	Voices      cstr    `c:"voices"`
	Tokens      cstr    `c:"tokens"`
	DataDir     cstr    `c:"data_dir"`
	LengthScale float32 `c:"length_scale"`
	DictDir     cstr    `c:"dict_dir"`
	Lexicon     cstr    `c:"lexicon"`
	Lang        cstr    `c:"lang"`
}

type ttsKitten struct {
	Model       cstr    `c:"model"`
	Voices      cstr    `c:"voices"`
	Tokens      cstr    `c:"tokens"`
	DataDir     cstr    `c:"data_dir"`
	LengthScale float32 `c:"length_scale"`
}

type ttsZipvoice struct {
	Tokens        cstr    `c:"tokens"`
	Encoder       cstr    `c:"encoder"`
	Decoder       cstr    `c:"decoder"`
	Vocoder       cstr    `c:"vocoder"`
	DataDir       cstr    `c:"data_dir"`
	Lexicon       cstr    `c:"lexicon"`
	FeatScale     float32 `c:"feat_scale"`
	TShift        float32 `c:"t_shift"`
	TargetRMS     float32 `c:"target_rms"`
	GuidanceScale float32 `c:"guidance_scale"`
}

type ttsPocket struct {
	LMFlow          cstr  `c:"lm_flow"`
	LMMain          cstr  `c:"lm_main"`
	Encoder         cstr  `c:"encoder"`
	Decoder         cstr  `c:"decoder"`
	TextConditioner cstr  `c:"text_conditioner"`
	VocabJSON       cstr  `c:"vocab_json"`
	TokenScoresJSON cstr  `c:"token_scores_json"`
	VoiceCacheCap   int32 `c:"voice_embedding_cache_capacity"`
}

type ttsSupertonic struct {
	DurationPredictor cstr `c:"duration_predictor"`
	TextEncoder       cstr `c:"text_encoder"`
	VectorEstimator   cstr `c:"vector_estimator"`
	Vocoder           cstr `c:"vocoder"`
	TTSJSON           cstr `c:"tts_json"`
	UnicodeIndexer    cstr `c:"unicode_indexer"`
	VoiceStyle        cstr `c:"voice_style"`
}

type ttsModelConfig struct {
	Vits       ttsVits       `c:"vits"`
	NumThreads int32         `c:"num_threads"`
	Debug      int32         `c:"debug"`
	Provider   cstr          `c:"provider"`
	Matcha     ttsMatcha     `c:"matcha"`
	Kokoro     ttsKokoro     `c:"kokoro"`
	Kitten     ttsKitten     `c:"kitten"`
	Zipvoice   ttsZipvoice   `c:"zipvoice"`
	Pocket     ttsPocket     `c:"pocket"`
	Supertonic ttsSupertonic `c:"supertonic"`
}

type ttsConfig struct {
	Model           ttsModelConfig `c:"model"`
	RuleFsts        cstr           `c:"rule_fsts"`
	MaxNumSentences int32          `c:"max_num_sentences"`
	RuleFars        cstr           `c:"rule_fars"`
	SilenceScale    float32        `c:"silence_scale"`
}

type generatedAudio struct {
	Samples    uintptr `c:"samples"`
	N          int32   `c:"n"`
	SampleRate int32   `c:"sample_rate"`
}

type generationConfig struct {
	SilenceScale        float32 `c:"silence_scale"`
	Speed               float32 `c:"speed"`
	Sid                 int32   `c:"sid"`
	ReferenceAudio      uintptr `c:"reference_audio"`
	ReferenceAudioLen   int32   `c:"reference_audio_len"`
	ReferenceSampleRate int32   `c:"reference_sample_rate"`
	ReferenceText       cstr    `c:"reference_text"`
	NumSteps            int32   `c:"num_steps"`
	Extra               cstr    `c:"extra"`
}

// Shared by the recognizers.

type featureConfig struct {
	SampleRate int32 `c:"sample_rate"`
	FeatureDim int32 `c:"feature_dim"`
}

type homophoneReplacer struct {
	DictDir  cstr `c:"dict_dir"`
	Lexicon  cstr `c:"lexicon"`
	RuleFsts cstr `c:"rule_fsts"`
}

// Offline recognition.

type offTransducer struct {
	Encoder cstr `c:"encoder"`
	Decoder cstr `c:"decoder"`
	Joiner  cstr `c:"joiner"`
}

type offOneModel struct {
	Model cstr `c:"model"`
}

type offWhisper struct {
	Encoder                 cstr  `c:"encoder"`
	Decoder                 cstr  `c:"decoder"`
	Language                cstr  `c:"language"`
	Task                    cstr  `c:"task"`
	TailPaddings            int32 `c:"tail_paddings"`
	EnableTokenTimestamps   int32 `c:"enable_token_timestamps"`
	EnableSegmentTimestamps int32 `c:"enable_segment_timestamps"`
}

type offCanary struct {
	Encoder cstr  `c:"encoder"`
	Decoder cstr  `c:"decoder"`
	SrcLang cstr  `c:"src_lang"`
	TgtLang cstr  `c:"tgt_lang"`
	UsePnc  int32 `c:"use_pnc"`
}

type offCohere struct {
	Encoder  cstr  `c:"encoder"`
	Decoder  cstr  `c:"decoder"`
	Language cstr  `c:"language"`
	UsePunct int32 `c:"use_punct"`
	UseItn   int32 `c:"use_itn"`
}

type offEncDec struct {
	Encoder cstr `c:"encoder"`
	Decoder cstr `c:"decoder"`
}

type offMoonshine struct {
	Preprocessor    cstr `c:"preprocessor"`
	Encoder         cstr `c:"encoder"`
	UncachedDecoder cstr `c:"uncached_decoder"`
	CachedDecoder   cstr `c:"cached_decoder"`
	MergedDecoder   cstr `c:"merged_decoder"`
}

type offLM struct {
	Model cstr    `c:"model"`
	Scale float32 `c:"scale"`
}

type offSenseVoice struct {
	Model    cstr  `c:"model"`
	Language cstr  `c:"language"`
	UseItn   int32 `c:"use_itn"`
}

type offFunASRNano struct {
	EncoderAdaptor cstr    `c:"encoder_adaptor"`
	LLM            cstr    `c:"llm"`
	Embedding      cstr    `c:"embedding"`
	Tokenizer      cstr    `c:"tokenizer"`
	SystemPrompt   cstr    `c:"system_prompt"`
	UserPrompt     cstr    `c:"user_prompt"`
	MaxNewTokens   int32   `c:"max_new_tokens"`
	Temperature    float32 `c:"temperature"`
	TopP           float32 `c:"top_p"`
	Seed           int32   `c:"seed"`
	Language       cstr    `c:"language"`
	Itn            int32   `c:"itn"`
	Hotwords       cstr    `c:"hotwords"`
}

type offQwen3ASR struct {
	ConvFrontend cstr    `c:"conv_frontend"`
	Encoder      cstr    `c:"encoder"`
	Decoder      cstr    `c:"decoder"`
	Tokenizer    cstr    `c:"tokenizer"`
	MaxTotalLen  int32   `c:"max_total_len"`
	MaxNewTokens int32   `c:"max_new_tokens"`
	Temperature  float32 `c:"temperature"`
	TopP         float32 `c:"top_p"`
	Seed         int32   `c:"seed"`
	Hotwords     cstr    `c:"hotwords"`
}

type offModelConfig struct {
	Transducer       offTransducer `c:"transducer"`
	Paraformer       offOneModel   `c:"paraformer"`
	NemoCtc          offOneModel   `c:"nemo_ctc"`
	Whisper          offWhisper    `c:"whisper"`
	Tdnn             offOneModel   `c:"tdnn"`
	Tokens           cstr          `c:"tokens"`
	NumThreads       int32         `c:"num_threads"`
	Debug            int32         `c:"debug"`
	Provider         cstr          `c:"provider"`
	ModelType        cstr          `c:"model_type"`
	ModelingUnit     cstr          `c:"modeling_unit"`
	BpeVocab         cstr          `c:"bpe_vocab"`
	TelespeechCtc    cstr          `c:"telespeech_ctc"`
	SenseVoice       offSenseVoice `c:"sense_voice"`
	Moonshine        offMoonshine  `c:"moonshine"`
	FireRedAsr       offEncDec     `c:"fire_red_asr"`
	Dolphin          offOneModel   `c:"dolphin"`
	ZipformerCtc     offOneModel   `c:"zipformer_ctc"`
	Canary           offCanary     `c:"canary"`
	WenetCtc         offOneModel   `c:"wenet_ctc"`
	Omnilingual      offOneModel   `c:"omnilingual"`
	Medasr           offOneModel   `c:"medasr"`
	FunasrNano       offFunASRNano `c:"funasr_nano"`
	FireRedAsrCtc    offOneModel   `c:"fire_red_asr_ctc"`
	Qwen3Asr         offQwen3ASR   `c:"qwen3_asr"`
	CohereTranscribe offCohere     `c:"cohere_transcribe"`
}

type offRecognizerConfig struct {
	Feat           featureConfig     `c:"feat_config"`
	Model          offModelConfig    `c:"model_config"`
	LM             offLM             `c:"lm_config"`
	DecodingMethod cstr              `c:"decoding_method"`
	MaxActivePaths int32             `c:"max_active_paths"`
	HotwordsFile   cstr              `c:"hotwords_file"`
	HotwordsScore  float32           `c:"hotwords_score"`
	RuleFsts       cstr              `c:"rule_fsts"`
	RuleFars       cstr              `c:"rule_fars"`
	BlankPenalty   float32           `c:"blank_penalty"`
	HR             homophoneReplacer `c:"hr"`
}

type offResult struct {
	Text              cstr    `c:"text"`
	Timestamps        uintptr `c:"timestamps"`
	Count             int32   `c:"count"`
	Tokens            cstr    `c:"tokens"`
	TokensArr         uintptr `c:"tokens_arr"`
	JSON              cstr    `c:"json"`
	Lang              cstr    `c:"lang"`
	Emotion           cstr    `c:"emotion"`
	Event             cstr    `c:"event"`
	Durations         uintptr `c:"durations"`
	YsLogProbs        uintptr `c:"ys_log_probs"`
	SegmentTimestamps uintptr `c:"segment_timestamps"`
	SegmentDurations  uintptr `c:"segment_durations"`
	SegmentTexts      cstr    `c:"segment_texts"`
	SegmentTextsArr   uintptr `c:"segment_texts_arr"`
	SegmentCount      int32   `c:"segment_count"`
}

// Online (streaming) recognition.

type onParaformer struct {
	Encoder cstr `c:"encoder"`
	Decoder cstr `c:"decoder"`
}

type onModelConfig struct {
	Transducer    offTransducer `c:"transducer"`
	Paraformer    onParaformer  `c:"paraformer"`
	Zipformer2Ctc offOneModel   `c:"zipformer2_ctc"`
	Tokens        cstr          `c:"tokens"`
	NumThreads    int32         `c:"num_threads"`
	Provider      cstr          `c:"provider"`
	Debug         int32         `c:"debug"`
	ModelType     cstr          `c:"model_type"`
	ModelingUnit  cstr          `c:"modeling_unit"`
	BpeVocab      cstr          `c:"bpe_vocab"`
	TokensBuf     cstr          `c:"tokens_buf"`
	TokensBufSize int32         `c:"tokens_buf_size"`
	NemoCtc       offOneModel   `c:"nemo_ctc"`
	TOneCtc       offOneModel   `c:"t_one_ctc"`
}

type onCtcFst struct {
	Graph     cstr  `c:"graph"`
	MaxActive int32 `c:"max_active"`
}

type onRecognizerConfig struct {
	Feat                    featureConfig     `c:"feat_config"`
	Model                   onModelConfig     `c:"model_config"`
	DecodingMethod          cstr              `c:"decoding_method"`
	MaxActivePaths          int32             `c:"max_active_paths"`
	EnableEndpoint          int32             `c:"enable_endpoint"`
	Rule1MinTrailingSilence float32           `c:"rule1_min_trailing_silence"`
	Rule2MinTrailingSilence float32           `c:"rule2_min_trailing_silence"`
	Rule3MinUtteranceLength float32           `c:"rule3_min_utterance_length"`
	HotwordsFile            cstr              `c:"hotwords_file"`
	HotwordsScore           float32           `c:"hotwords_score"`
	CtcFst                  onCtcFst          `c:"ctc_fst_decoder_config"`
	RuleFsts                cstr              `c:"rule_fsts"`
	RuleFars                cstr              `c:"rule_fars"`
	BlankPenalty            float32           `c:"blank_penalty"`
	HotwordsBuf             cstr              `c:"hotwords_buf"`
	HotwordsBufSize         int32             `c:"hotwords_buf_size"`
	HR                      homophoneReplacer `c:"hr"`
}

type onResult struct {
	Text       cstr    `c:"text"`
	Tokens     cstr    `c:"tokens"`
	TokensArr  uintptr `c:"tokens_arr"`
	Timestamps uintptr `c:"timestamps"`
	Count      int32   `c:"count"`
	JSON       cstr    `c:"json"`
}

// Speaker diarization.

type pyannoteConfig struct {
	Model            cstr    `c:"model"`
	WindowShiftRatio float32 `c:"window_shift_ratio"`
}

type segmentationConfig struct {
	Pyannote   pyannoteConfig `c:"pyannote"`
	NumThreads int32          `c:"num_threads"`
	Debug      int32          `c:"debug"`
	Provider   cstr           `c:"provider"`
}

type embeddingConfig struct {
	Model      cstr  `c:"model"`
	NumThreads int32 `c:"num_threads"`
	Debug      int32 `c:"debug"`
	Provider   cstr  `c:"provider"`
}

type clusteringConfig struct {
	NumClusters       int32   `c:"num_clusters"`
	Threshold         float32 `c:"threshold"`
	ComputeConfidence int32   `c:"compute_confidence"`
}

type diarizationConfig struct {
	Segmentation   segmentationConfig `c:"segmentation"`
	Embedding      embeddingConfig    `c:"embedding"`
	Clustering     clusteringConfig   `c:"clustering"`
	MinDurationOn  float32            `c:"min_duration_on"`
	MinDurationOff float32            `c:"min_duration_off"`
}

type diarizationSegment struct {
	Start      float32 `c:"start"`
	End        float32 `c:"end"`
	Speaker    int32   `c:"speaker"`
	Confidence float32 `c:"confidence"`
}
