/* Layout fixture for backends/sherpa's TestCLayout.
 *
 * The memory layout (member names, types and order) of the structs of
 * sherpa-onnx's C API that backends/sherpa uses, as c-api.h declares them
 * at version 1.13.8 (tag v1.13.8 of k2-fsa/sherpa-onnx; the same header
 * ships in the Go module github.com/k2-fsa/sherpa-onnx-go-linux@v1.13.8).
 * Written for Sluice from those definitions: declarations only, no
 * documentation, no functions. The test compiles a program that prints
 * sizeof and offsetof for each member and compares them with the Go
 * mirrors in capi.go. When the library is upgraded, update this file from
 * the new header first: a changed layout then fails the test instead of
 * corrupting a config silently. */
#include <stdint.h>

#define S(name) typedef struct name name; struct name
typedef const char *cs;

S(SherpaOnnxOfflineTtsVitsModelConfig) { cs model, lexicon, tokens, data_dir; float noise_scale, noise_scale_w, length_scale; cs dict_dir; };
S(SherpaOnnxOfflineTtsMatchaModelConfig) { cs acoustic_model, vocoder, lexicon, tokens, data_dir; float noise_scale, length_scale; cs dict_dir; };
S(SherpaOnnxOfflineTtsKokoroModelConfig) { cs model, voices, tokens, data_dir; float length_scale; cs dict_dir, lexicon, lang; };
S(SherpaOnnxOfflineTtsKittenModelConfig) { cs model, voices, tokens, data_dir; float length_scale; };
S(SherpaOnnxOfflineTtsZipvoiceModelConfig) { cs tokens, encoder, decoder, vocoder, data_dir, lexicon; float feat_scale, t_shift, target_rms, guidance_scale; };
S(SherpaOnnxOfflineTtsPocketModelConfig) { cs lm_flow, lm_main, encoder, decoder, text_conditioner, vocab_json, token_scores_json; int32_t voice_embedding_cache_capacity; };
S(SherpaOnnxOfflineTtsSupertonicModelConfig) { cs duration_predictor, text_encoder, vector_estimator, vocoder, tts_json, unicode_indexer, voice_style; };
S(SherpaOnnxOfflineTtsModelConfig) {
	SherpaOnnxOfflineTtsVitsModelConfig vits; int32_t num_threads, debug; cs provider;
	SherpaOnnxOfflineTtsMatchaModelConfig matcha; SherpaOnnxOfflineTtsKokoroModelConfig kokoro;
	SherpaOnnxOfflineTtsKittenModelConfig kitten; SherpaOnnxOfflineTtsZipvoiceModelConfig zipvoice;
	SherpaOnnxOfflineTtsPocketModelConfig pocket; SherpaOnnxOfflineTtsSupertonicModelConfig supertonic;
};
S(SherpaOnnxOfflineTtsConfig) { SherpaOnnxOfflineTtsModelConfig model; cs rule_fsts; int32_t max_num_sentences; cs rule_fars; float silence_scale; };
S(SherpaOnnxGeneratedAudio) { const float *samples; int32_t n, sample_rate; };
S(SherpaOnnxGenerationConfig) {
	float silence_scale, speed; int32_t sid; const float *reference_audio;
	int32_t reference_audio_len, reference_sample_rate; cs reference_text; int32_t num_steps; cs extra;
};

S(SherpaOnnxFeatureConfig) { int32_t sample_rate, feature_dim; };
S(SherpaOnnxHomophoneReplacerConfig) { cs dict_dir, lexicon, rule_fsts; };

S(SherpaOnnxOfflineTransducerModelConfig) { cs encoder, decoder, joiner; };
S(SherpaOnnxOfflineNemoEncDecCtcModelConfig) { cs model; };
S(SherpaOnnxOfflineWhisperModelConfig) { cs encoder, decoder, language, task; int32_t tail_paddings, enable_token_timestamps, enable_segment_timestamps; };
S(SherpaOnnxOfflineCanaryModelConfig) { cs encoder, decoder, src_lang, tgt_lang; int32_t use_pnc; };
S(SherpaOnnxOfflineCohereTranscribeModelConfig) { cs encoder, decoder, language; int32_t use_punct, use_itn; };
S(SherpaOnnxOfflineFireRedAsrModelConfig) { cs encoder, decoder; };
S(SherpaOnnxOfflineMoonshineModelConfig) { cs preprocessor, encoder, uncached_decoder, cached_decoder, merged_decoder; };
S(SherpaOnnxOfflineLMConfig) { cs model; float scale; };
S(SherpaOnnxOfflineSenseVoiceModelConfig) { cs model, language; int32_t use_itn; };
S(SherpaOnnxOfflineFunASRNanoModelConfig) {
	cs encoder_adaptor, llm, embedding, tokenizer, system_prompt, user_prompt;
	int32_t max_new_tokens; float temperature, top_p; int32_t seed; cs language; int32_t itn; cs hotwords;
};
S(SherpaOnnxOfflineQwen3ASRModelConfig) {
	cs conv_frontend, encoder, decoder, tokenizer; int32_t max_total_len, max_new_tokens;
	float temperature, top_p; int32_t seed; cs hotwords;
};
/* Every single-file offline model config (paraformer, nemo_ctc, tdnn,
 * dolphin, zipformer_ctc, wenet_ctc, omnilingual, medasr,
 * fire_red_asr_ctc) is { const char *model; }: one type stands for them. */
typedef SherpaOnnxOfflineNemoEncDecCtcModelConfig OneModel;
S(SherpaOnnxOfflineModelConfig) {
	SherpaOnnxOfflineTransducerModelConfig transducer; OneModel paraformer; OneModel nemo_ctc;
	SherpaOnnxOfflineWhisperModelConfig whisper; OneModel tdnn;
	cs tokens; int32_t num_threads, debug; cs provider, model_type, modeling_unit, bpe_vocab, telespeech_ctc;
	SherpaOnnxOfflineSenseVoiceModelConfig sense_voice; SherpaOnnxOfflineMoonshineModelConfig moonshine;
	SherpaOnnxOfflineFireRedAsrModelConfig fire_red_asr; OneModel dolphin; OneModel zipformer_ctc;
	SherpaOnnxOfflineCanaryModelConfig canary; OneModel wenet_ctc; OneModel omnilingual; OneModel medasr;
	SherpaOnnxOfflineFunASRNanoModelConfig funasr_nano; OneModel fire_red_asr_ctc;
	SherpaOnnxOfflineQwen3ASRModelConfig qwen3_asr; SherpaOnnxOfflineCohereTranscribeModelConfig cohere_transcribe;
};
S(SherpaOnnxOfflineRecognizerConfig) {
	SherpaOnnxFeatureConfig feat_config; SherpaOnnxOfflineModelConfig model_config; SherpaOnnxOfflineLMConfig lm_config;
	cs decoding_method; int32_t max_active_paths; cs hotwords_file; float hotwords_score;
	cs rule_fsts, rule_fars; float blank_penalty; SherpaOnnxHomophoneReplacerConfig hr;
};
S(SherpaOnnxOfflineRecognizerResult) {
	cs text; float *timestamps; int32_t count; cs tokens; const char *const *tokens_arr; cs json, lang, emotion, event;
	float *durations, *ys_log_probs; const float *segment_timestamps, *segment_durations; cs segment_texts;
	const char *const *segment_texts_arr; int32_t segment_count;
};

S(SherpaOnnxOnlineParaformerModelConfig) { cs encoder, decoder; };
S(SherpaOnnxOnlineModelConfig) {
	SherpaOnnxOfflineTransducerModelConfig transducer; SherpaOnnxOnlineParaformerModelConfig paraformer; OneModel zipformer2_ctc;
	cs tokens; int32_t num_threads; cs provider; int32_t debug; cs model_type, modeling_unit, bpe_vocab, tokens_buf;
	int32_t tokens_buf_size; OneModel nemo_ctc; OneModel t_one_ctc;
};
S(SherpaOnnxOnlineCtcFstDecoderConfig) { cs graph; int32_t max_active; };
S(SherpaOnnxOnlineRecognizerConfig) {
	SherpaOnnxFeatureConfig feat_config; SherpaOnnxOnlineModelConfig model_config; cs decoding_method;
	int32_t max_active_paths, enable_endpoint; float rule1_min_trailing_silence, rule2_min_trailing_silence, rule3_min_utterance_length;
	cs hotwords_file; float hotwords_score; SherpaOnnxOnlineCtcFstDecoderConfig ctc_fst_decoder_config;
	cs rule_fsts, rule_fars; float blank_penalty; cs hotwords_buf; int32_t hotwords_buf_size; SherpaOnnxHomophoneReplacerConfig hr;
};
S(SherpaOnnxOnlineRecognizerResult) { cs text, tokens; const char *const *tokens_arr; float *timestamps; int32_t count; cs json; };

S(SherpaOnnxOfflineSpeakerSegmentationPyannoteModelConfig) { cs model; float window_shift_ratio; };
S(SherpaOnnxOfflineSpeakerSegmentationModelConfig) { SherpaOnnxOfflineSpeakerSegmentationPyannoteModelConfig pyannote; int32_t num_threads, debug; cs provider; };
S(SherpaOnnxSpeakerEmbeddingExtractorConfig) { cs model; int32_t num_threads, debug; cs provider; };
S(SherpaOnnxFastClusteringConfig) { int32_t num_clusters; float threshold; int32_t compute_confidence; };
S(SherpaOnnxOfflineSpeakerDiarizationConfig) {
	SherpaOnnxOfflineSpeakerSegmentationModelConfig segmentation; SherpaOnnxSpeakerEmbeddingExtractorConfig embedding;
	SherpaOnnxFastClusteringConfig clustering; float min_duration_on, min_duration_off;
};
S(SherpaOnnxOfflineSpeakerDiarizationSegment) { float start, end; int32_t speaker; float confidence; };
