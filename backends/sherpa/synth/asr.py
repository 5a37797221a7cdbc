"""Synthetic recognizers: NeMo CTC and transducers, Zipformer (offline and
streaming), SenseVoice, Paraformer, Whisper, Moonshine, Canary."""
import os

import numpy as np
from onnx import TensorProto, helper

from common import *  # noqa: F401,F403 (the helpers and alphabets)

def nemo_ctc(out, seed):
    """NeMo EncDecCTCModelBPE (Parakeet CTC and others): audio_signal
    [N, 80, T] float features, length [N] int64; logprobs [N, T', V] with
    T' = ceil(T / 4) (sherpa-onnx takes length / subsampling_factor), the
    blank last (NeMo's convention)."""
    r = rng(seed)
    vocab = len(ASR_PIECES) + 1
    hidden = 192
    inits = [init("w1", (r.standard_normal((80, hidden)) / np.sqrt(80)).astype(np.float32)),
             init("w2", (r.standard_normal((hidden, vocab)) * 2 / np.sqrt(hidden)).astype(np.float32)),
             init("bias", np.concatenate([np.zeros(vocab - 1), [1.5]]).astype(np.float32)),
             const_i64("st", [0]), const_i64("en", [1 << 30]), const_i64("ax1", [1]), const_i64("step", [4])]
    nodes = [helper.make_node("Transpose", ["audio_signal"], ["x"], perm=[0, 2, 1]),
             helper.make_node("Slice", ["x", "st", "en", "ax1", "step"], ["xs"]),
             helper.make_node("MatMul", ["xs", "w1"], ["h"]),
             helper.make_node("Tanh", ["h"], ["ht"]),
             helper.make_node("MatMul", ["ht", "w2"], ["l"]),
             helper.make_node("Add", ["l", "bias"], ["lb"]),
             helper.make_node("LogSoftmax", ["lb"], ["logprobs"], axis=-1)]
    g = helper.make_graph(nodes, "nemo_ctc",
                          [helper.make_tensor_value_info("audio_signal", TensorProto.FLOAT, ["N", 80, "T"]),
                           helper.make_tensor_value_info("length", TensorProto.INT64, ["N"])],
                          [helper.make_tensor_value_info("logprobs", TensorProto.FLOAT, ["N", "T4", vocab])], inits)
    save(g, os.path.join(out, "model.onnx"), {
        "vocab_size": vocab, "subsampling_factor": 4, "normalize_type": "per_feature",
        "model_type": "EncDecCTCModelBPE", "is_giga_am": 0,
    })
    asr_tokens(out, blank_last=True)


def offline_transducer(out, seed, bpe=False):
    """Offline Zipformer transducer (icefall's export, as
    offline-transducer-model.cc runs it; Parakeet's NeMo transducers have
    the same three files with other inputs): the encoder maps x [N, T, 80]
    and x_lens [N] to encoder_out [N, ceil(T/4), dim] and
    encoder_out_lens [N]."""
    r = rng(seed)
    dim = 64
    inits = [init("w", (r.standard_normal((80, dim)) / np.sqrt(80)).astype(np.float32)),
             const_i64("st", [0]), const_i64("en", [1 << 30]), const_i64("ax1", [1]), const_i64("step", [4]),
             const_i64("three", [3]), const_i64("four", [4])]
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax1", "step"], ["xs"]),
             helper.make_node("MatMul", ["xs", "w"], ["encoder_out"]),
             helper.make_node("Add", ["x_lens", "three"], ["l3"]),
             helper.make_node("Div", ["l3", "four"], ["encoder_out_lens"])]
    g = helper.make_graph(nodes, "encoder",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", 80]),
                           helper.make_tensor_value_info("x_lens", TensorProto.INT64, ["N"])],
                          [helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, ["N", "T4", dim]),
                           helper.make_tensor_value_info("encoder_out_lens", TensorProto.INT64, ["N"])], inits)
    save(g, os.path.join(out, "encoder.onnx"), {
        "model_type": "zipformer2", "version": 1, "model_author": "k2-fsa", "comment": "non-streaming zipformer2"})
    if bpe:  # icefall's English BPE models: word pieces and bpe.vocab
        vocab = asr_tokens(out, blank_last=False, pieces=BPE_PIECES)
        bpe_vocab(out)
    else:
        vocab = asr_tokens(out, blank_last=False)
    transducer_decoder_joiner(out, r, vocab, dim)


def online_zipformer2(out, seed, bpe=False):
    """Streaming Zipformer2 transducer (icefall's export, as
    online-zipformer2-transducer-model.cc runs it): the encoder takes x
    [N, T, 80] and the 6 caches of each layer plus the embedding cache and
    processed_lens, and returns encoder_out [N, T', dim] and the new
    caches in the same order. One stack of one layer here; the caches pass
    through unchanged (the synthetic encoder has no memory: each chunk's
    output depends on the chunk's frames alone)."""
    r = rng(seed)
    dim, T, chunk, left = 64, 45, 32, 64
    enc_dim, heads, qd, vd, kernel = 16, 2, 4, 4, 7
    inits = [init("w", (r.standard_normal((80, dim)) / np.sqrt(80)).astype(np.float32)),
             const_i64("st", [0]), const_i64("en", [chunk]), const_i64("ax1", [1]), const_i64("step", [4])]
    states = [("cached_key_0", [left, "N", qd * heads]), ("cached_nonlin_attn_0", [1, "N", left, 3 * enc_dim // 4]),
              ("cached_val1_0", [left, "N", vd * heads]), ("cached_val2_0", [left, "N", vd * heads]),
              ("cached_conv1_0", ["N", enc_dim, kernel // 2]), ("cached_conv2_0", ["N", enc_dim, kernel // 2]),
              ("embed_states", ["N", 128, 3, 19])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, 80])]
    outputs = [helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, ["N", chunk // 4, dim])]
    nodes = [helper.make_node("Slice", ["x", "st", "en", "ax1", "step"], ["xs"]),
             helper.make_node("MatMul", ["xs", "w"], ["encoder_out"])]
    for name, shape in states:
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        outputs.append(helper.make_tensor_value_info("new_" + name, TensorProto.FLOAT, shape))
        nodes.append(helper.make_node("Identity", [name], ["new_" + name]))
    inputs.append(helper.make_tensor_value_info("processed_lens", TensorProto.INT64, ["N"]))
    outputs.append(helper.make_tensor_value_info("new_processed_lens", TensorProto.INT64, ["N"]))
    inits.append(const_i64("chunk_len", [chunk // 2]))
    nodes.append(helper.make_node("Add", ["processed_lens", "chunk_len"], ["new_processed_lens"]))
    g = helper.make_graph(nodes, "encoder", inputs, outputs, inits)
    save(g, os.path.join(out, "encoder.onnx"), {
        "model_type": "zipformer2", "version": 1, "model_author": "k2-fsa", "comment": "streaming zipformer2",
        "decode_chunk_len": chunk, "T": T, "num_encoder_layers": "1", "encoder_dims": str(enc_dim),
        "cnn_module_kernels": str(kernel), "left_context_len": str(left), "query_head_dims": str(qd),
        "value_head_dims": str(vd), "num_heads": str(heads),
    })
    if bpe:
        vocab = asr_tokens(out, blank_last=False, pieces=BPE_PIECES)
        bpe_vocab(out)
    else:
        vocab = asr_tokens(out, blank_last=False)
    transducer_decoder_joiner(out, r, vocab, dim)


def nemo_transducer(out, seed, tdt):
    """NeMo transducer (Parakeet TDT or RNNT, as offline-transducer-nemo-
    model.cc runs it): the encoder maps audio_signal [B, 80, T] and length
    [B] to outputs [B, D, T/8] and encoded_lengths; the decoder maps
    targets [B, 1] int32, target_length [B] int32 and two LSTM states
    [layers, B, H] to decoder_output [B, D, 1], its length and the states;
    the joiner maps encoder_outputs and decoder_outputs [B, D, 1] to
    logits [B, 1, 1, vocab + 1 (+ 5 durations for TDT)]. The blank is the
    last token; metadata vocab_size excludes it."""
    r = rng(seed)
    d, layers, hid = 32, 1, 16
    pieces = ASR_PIECES[1:] + ["<unk>"]
    vocab = len(pieces) + 1
    w = (r.standard_normal((80, d)) / np.sqrt(80)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Transpose", ["audio_signal"], ["x"], perm=[0, 2, 1]),
         helper.make_node("Slice", ["x", "st", "en", "ax1", "step"], ["xs"]),
         helper.make_node("MatMul", ["xs", "w"], ["h"]),
         helper.make_node("Transpose", ["h"], ["outputs"], perm=[0, 2, 1]),
         helper.make_node("Div", ["length", "eight"], ["encoded_lengths"])],
        "encoder", [helper.make_tensor_value_info("audio_signal", TensorProto.FLOAT, ["B", 80, "T"]),
                    helper.make_tensor_value_info("length", TensorProto.INT64, ["B"])],
        [helper.make_tensor_value_info("outputs", TensorProto.FLOAT, ["B", d, "T8"]),
         helper.make_tensor_value_info("encoded_lengths", TensorProto.INT64, ["B"])],
        [init("w", w), const_i64("st", [0]), const_i64("en", [1 << 30]), const_i64("ax1", [1]), const_i64("step", [8]),
         const_i64("eight", [8])])
    meta = {"model_type": "EncDecRNNTBPEModel", "vocab_size": vocab - 1, "subsampling_factor": 8, "normalize_type": "per_feature",
            "pred_rnn_layers": layers, "pred_hidden": hid, "feat_dim": 80, "is_giga_am": 0}
    if tdt:
        meta["url"] = "https://huggingface.co/nvidia/parakeet-tdt-0.6b-v2"
    save(g, os.path.join(out, "encoder.int8.onnx"), meta)
    emb = (r.standard_normal((vocab, d)) * 0.5).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Cast", ["targets"], ["t64"], to=TensorProto.INT64),
         helper.make_node("Gather", ["emb", "t64"], ["e"], axis=0),           # [B, 1, D]
         helper.make_node("Transpose", ["e"], ["decoder_output"], perm=[0, 2, 1]),
         helper.make_node("Identity", ["target_length"], ["decoder_output_length"]),
         helper.make_node("Identity", ["states.1"], ["states"]),
         helper.make_node("Identity", ["onnx::Slice_3"], ["162"])],
        "decoder", [helper.make_tensor_value_info("targets", TensorProto.INT32, ["B", 1]),
                    helper.make_tensor_value_info("target_length", TensorProto.INT32, ["B"]),
                    helper.make_tensor_value_info("states.1", TensorProto.FLOAT, [layers, "B", hid]),
                    helper.make_tensor_value_info("onnx::Slice_3", TensorProto.FLOAT, [layers, "B", hid])],
        [helper.make_tensor_value_info("decoder_output", TensorProto.FLOAT, ["B", d, 1]),
         helper.make_tensor_value_info("decoder_output_length", TensorProto.INT32, ["B"]),
         helper.make_tensor_value_info("states", TensorProto.FLOAT, [layers, "B", hid]),
         helper.make_tensor_value_info("162", TensorProto.FLOAT, [layers, "B", hid])], [init("emb", emb)])
    save(g, os.path.join(out, "decoder.int8.onnx"), {"model_type": "EncDecRNNTBPEModel"})
    outdim = vocab + (5 if tdt else 0)
    jw = (r.standard_normal((d, outdim)) * 3 / np.sqrt(d)).astype(np.float32)
    jb = np.zeros(outdim, dtype=np.float32)
    jb[vocab - 1] = 1.0  # the blank
    if tdt:
        jb[vocab:] = [-2, 2, 0, -1, -2]  # durations: mostly one frame
    g = helper.make_graph(
        [helper.make_node("Add", ["encoder_outputs", "decoder_outputs"], ["s"]),
         helper.make_node("Transpose", ["s"], ["st"], perm=[0, 2, 1]),       # [B, 1, D]
         helper.make_node("Tanh", ["st"], ["t"]),
         helper.make_node("MatMul", ["t", "jw"], ["l"]),
         helper.make_node("Add", ["l", "jb"], ["l2"]),
         helper.make_node("Unsqueeze", ["l2", "ax2"], ["logits"])],
        "joiner", [helper.make_tensor_value_info("encoder_outputs", TensorProto.FLOAT, ["B", d, 1]),
                   helper.make_tensor_value_info("decoder_outputs", TensorProto.FLOAT, ["B", d, 1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", 1, 1, outdim])],
        [init("jw", jw), init("jb", jb), const_i64("ax2", [2])])
    save(g, os.path.join(out, "joiner.int8.onnx"), {"model_type": "EncDecRNNTBPEModel"})
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(pieces + ["<blk>"])))


def sense_voice(out, seed):
    """SenseVoice (FunASR's, as offline-sense-voice-model.cc runs it): x
    [N, T, 560] (80-dim fbank stacked 7 frames every 6: LFR), x_length,
    language and text_norm [N] int32; logits [N, T + 4, vocab], the first
    4 frames the language, emotion, event and ITN tags. CTC with blank 0."""
    r = rng(seed)
    toks = ["<blk>"] + SENSE_VOICE_TAGS + ASR_PIECES[1:]
    vocab = len(toks)
    w = (r.standard_normal((560, vocab)) * 2 / np.sqrt(560)).astype(np.float32)
    w[:, 1:1 + len(SENSE_VOICE_TAGS)] -= 4  # the tags only where the prompt puts them
    prefix = np.full((1, 4, vocab), -8.0, dtype=np.float32)
    for i, tag in enumerate(["<|en|>", "<|NEUTRAL|>", "<|Speech|>", "<|woitn|>"]):
        prefix[0, i, toks.index(tag)] = 8.0
    bias = np.zeros(vocab, dtype=np.float32)
    bias[0] = 1.5
    # The language input (a token ID, lang_auto 0) adds a bias of its own
    # to every frame, so a request's language reaches the transcript.
    lang_bias = np.zeros((vocab, vocab), dtype=np.float32)
    for t in ["zh", "en", "yue", "ja", "ko"]:
        lang_bias[toks.index("<|%s|>" % t), len(SENSE_VOICE_TAGS) + 1:] = r.standard_normal(vocab - len(SENSE_VOICE_TAGS) - 1) * 2
    inits = [init("w", w), init("bias", bias), init("prefix", prefix), const_i64("zero", [0]), const_i64("one", [1]),
             const_i64("rest", [4, vocab]), init("lang_bias", lang_bias)]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["l"]),
             helper.make_node("Gather", ["lang_bias", "language"], ["lbias"], axis=0),
             helper.make_node("Unsqueeze", ["lbias", "one"], ["lbias3"]),
             helper.make_node("Add", ["l", "lbias3"], ["l0"]),
             helper.make_node("Add", ["l0", "bias"], ["lb"]),
             helper.make_node("Shape", ["x"], ["xshape"]),
             helper.make_node("Slice", ["xshape", "zero", "one"], ["n"]),
             helper.make_node("Concat", ["n", "rest"], ["pshape"], axis=0),
             helper.make_node("Expand", ["prefix", "pshape"], ["p"]),
             helper.make_node("Concat", ["p", "lb"], ["logits"], axis=1)]
    g = helper.make_graph(nodes, "sense_voice",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", 560]),
                           helper.make_tensor_value_info("x_length", TensorProto.INT32, ["N"]),
                           helper.make_tensor_value_info("language", TensorProto.INT32, ["N"]),
                           helper.make_tensor_value_info("text_norm", TensorProto.INT32, ["N"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "T4", vocab])], inits)
    ids = {t: toks.index("<|%s|>" % t) for t in ["zh", "en", "yue", "ja", "ko"]}
    save(g, os.path.join(out, "model.onnx"), {
        "model_type": "sense_voice_ctc", "comment": "synthetic SenseVoice", "vocab_size": vocab, "blank_id": 0,
        "lfr_window_size": 7, "lfr_window_shift": 6, "normalize_samples": 0,
        "with_itn": toks.index("<|withitn|>"), "without_itn": toks.index("<|woitn|>"),
        "lang_auto": 0, "lang_zh": ids["zh"], "lang_en": ids["en"], "lang_ja": ids["ja"], "lang_ko": ids["ko"], "lang_yue": ids["yue"],
        "neg_mean": ",".join(["-8.0"] * 560), "inv_stddev": ",".join(["0.25"] * 560),
    })
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(toks)))


def paraformer(out, seed):
    """Paraformer (FunASR's timestamp export, as offline-paraformer-model.cc
    runs it): speech [N, T, 560] (LFR 7/6 features after CMVN),
    speech_lengths [N] int32; logits [N, U, vocab], token_num [N],
    us_alphas and us_cif_peak (the token times). Greedy search stops at
    </s>, which tokens.txt must hold."""
    r = rng(seed)
    # FunASR's vocabulary: whole words, and BPE pieces that end in "@@"
    # where the word goes on.
    words = [p[1:] for p in ASR_PIECES if p.startswith("\u2581")]
    letters = [c for c in "bcdefghjklmnopqrstuvwxyz"]  # a and i are words already
    toks = ["<blank>", "<s>", "</s>"] + words + [c + "@@" for c in letters] + letters + ["<unk>"]
    vocab = len(toks)
    w = (r.standard_normal((560, vocab)) * 2 / np.sqrt(560)).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[:3] = -30  # <blank>, <s> and </s> never win: every frame a token
    inits = [init("w", w), init("bias", bias), const_i64("st", [0]), const_i64("en", [1 << 30]), const_i64("ax1", [1]), const_i64("step", [2]),
             const_i64("ax0", [0])]
    nodes = [helper.make_node("Slice", ["speech", "st", "en", "ax1", "step"], ["xs"]),
             helper.make_node("MatMul", ["xs", "w"], ["lw"]),
             helper.make_node("Add", ["lw", "bias"], ["logits"]),
             helper.make_node("Shape", ["logits"], ["ls"]),
             helper.make_node("Slice", ["ls", "ax1", "step"], ["u"]),  # [U] (dims 1..1)
             helper.make_node("Shape", ["speech_lengths"], ["n"]),
             helper.make_node("Expand", ["u", "n"], ["token_num"]),
             # The timestamp export's us_alphas [N, T] and us_cif_peak
             # [N, 3 T + 6] (upsampled 3x: one index is 20 ms): a peak
             # (1.0) every 6 indices, the frames the tokens come from
             # (every second 60 ms LFR frame), one more than the tokens
             # (the library drops the last).
             helper.make_node("ReduceSum", ["speech", "two"], ["us_alphas"], keepdims=0),
             helper.make_node("Shape", ["speech"], ["ss"]),
             helper.make_node("Slice", ["ss", "ax1", "two"], ["t1"]),
             helper.make_node("Mul", ["t1", "three"], ["t3"]),
             helper.make_node("Add", ["t3", "six"], ["plen"]),
             helper.make_node("Squeeze", ["plen", "ax0"], ["plen0"]),
             helper.make_node("Range", ["zero", "plen0", "one"], ["k"]),
             helper.make_node("Mod", ["k", "six"], ["km"]),
             helper.make_node("Equal", ["km", "zero1"], ["kz"]),
             helper.make_node("Cast", ["kz"], ["kf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["kf", "ax0"], ["k2"]),
             helper.make_node("Concat", ["n", "plen"], ["pshape"], axis=0),
             helper.make_node("Expand", ["k2", "pshape"], ["us_cif_peak"])]
    inits += [const_i64("two", [2]), const_i64("three", [3]), const_i64("six", [6]), const_i64("zero1", [0]),
              init("zero", np.array(0, dtype=np.int64)), init("one", np.array(1, dtype=np.int64))]
    g = helper.make_graph(nodes, "paraformer",
                          [helper.make_tensor_value_info("speech", TensorProto.FLOAT, ["N", "T", 560]),
                           helper.make_tensor_value_info("speech_lengths", TensorProto.INT32, ["N"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "U", vocab]),
                           helper.make_tensor_value_info("token_num", TensorProto.INT64, ["N"]),
                           helper.make_tensor_value_info("us_alphas", TensorProto.FLOAT, ["N", "T"]),
                           helper.make_tensor_value_info("us_cif_peak", TensorProto.FLOAT, ["N", "P"])], inits)
    save(g, os.path.join(out, "model.onnx"), {
        "model_type": "paraformer", "version": 1, "vocab_size": vocab, "lfr_window_size": 7, "lfr_window_shift": 6,
        "neg_mean": ",".join(["-8.0"] * 560), "inv_stddev": ",".join(["0.25"] * 560),
    })
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(toks)))


def whisper(out, seed, multi=False):
    """Whisper as sherpa-onnx's export-onnx.py writes it (an English-only
    model: is_multilingual 0), as offline-whisper-model.cc runs it: the
    encoder maps mel [N, 80, T] to n_layer_cross_k and n_layer_cross_v
    [layers, N, T, state]; the decoder maps tokens [N, L], the self-attention
    caches [layers, N, ctx, state], the cross caches and offset [1] to
    logits [N, L, vocab] and the new caches. The synthetic decoder's logits
    follow the last token and the audio's mean, and <|endoftext|> grows
    with the offset, so a transcript ends well within n_text_ctx.

    multi: a multilingual model (tiny-*.onnx, is_multilingual 1, four
    language tokens after the specials, sot_sequence sot, <|en|>,
    transcribe). Its decoder adds the language token's vector of the
    prompt to the self-attention cache it returns and biases the logits
    by the cache's mean, so the prompt's language reaches every step."""
    r = rng(seed)
    pieces = [" " + w for w in "the a of to and in is it you that he was for on are with as his they be at one have this".split()] + \
        list("abcdefghijklmnopqrstuvwxyz'")
    n_text = len(pieces)
    eot, sot, translate, transcribe, no_speech, no_timestamps = n_text, n_text + 1, n_text + 2, n_text + 3, n_text + 4, n_text + 5
    vocab = n_text + 6
    codes = ["en", "de", "es", "fr"]
    lang_ids = list(range(vocab, vocab + len(codes))) if multi else []
    vocab += len(lang_ids)
    prefix = "tiny-" if multi else "tiny.en-"
    layers, ctx, state = 1, 24, 16
    w = (r.standard_normal((80, state)) / np.sqrt(80)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Transpose", ["mel"], ["mt"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["mt", "w"], ["k"]),
         helper.make_node("Unsqueeze", ["k", "ax0"], ["n_layer_cross_k"]),
         helper.make_node("Mul", ["n_layer_cross_k", "half"], ["n_layer_cross_v"])],
        "encoder", [helper.make_tensor_value_info("mel", TensorProto.FLOAT, ["N", 80, "T"])],
        [helper.make_tensor_value_info("n_layer_cross_k", TensorProto.FLOAT, [layers, "N", "T", state]),
         helper.make_tensor_value_info("n_layer_cross_v", TensorProto.FLOAT, [layers, "N", "T", state])],
        [init("w", w), const_i64("ax0", [0]), const_f32("half", [0.5])])
    meta = {
        "model_type": "whisper-tiny.en", "n_mels": 80, "n_audio_ctx": 1500, "n_text_layer": layers, "n_text_ctx": ctx,
        "n_text_state": state, "n_vocab": vocab, "sot": sot, "eot": eot, "blank_id": 0, "translate": translate,
        "transcribe": transcribe, "is_multilingual": 0, "no_timestamps": no_timestamps, "no_speech": no_speech,
        "sot_sequence": str(sot), "sot_prev": 0, "sot_lm": 0,
    }
    if multi:
        meta.update({"model_type": "whisper-tiny", "is_multilingual": 1, "sot_sequence": "%d,%d,%d" % (sot, lang_ids[0], transcribe),
                     "all_language_tokens": ",".join(map(str, lang_ids)), "all_language_codes": ",".join(codes)})
    save(g, os.path.join(out, prefix + "encoder.onnx"), meta)
    emb = (r.standard_normal((vocab, vocab)) * 2).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[eot + 1:] = -30.0
    bias[eot] = -6.0
    onehot = np.zeros(vocab, dtype=np.float32)
    onehot[eot] = 0.6
    cross = (r.standard_normal(vocab) * 4).astype(np.float32)
    lang_emb = np.zeros((vocab, state), dtype=np.float32)
    proj = np.zeros((state, vocab), dtype=np.float32)
    if multi:
        for i in lang_ids:
            lang_emb[i] = r.standard_normal(state)
        proj[:, :n_text] = r.standard_normal((state, n_text)) * 3
    nodes = [helper.make_node("Gather", ["emb", "tokens"], ["e"], axis=0),
             helper.make_node("ReduceMean", ["n_layer_cross_k"], ["cm"], axes=[0, 2, 3], keepdims=0),
             helper.make_node("Reshape", ["cm", "n11"], ["cm3"]),
             helper.make_node("Mul", ["cm3", "cross"], ["ct"]),
             helper.make_node("Cast", ["offset"], ["of"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["of", "onehot"], ["et"]),
             helper.make_node("Add", ["e", "ct"], ["l1"]),
             helper.make_node("Add", ["l1", "et"], ["l2"]),
             helper.make_node("Add", ["l2", "bias"], ["l3"]),
             helper.make_node("Gather", ["lang_emb", "tokens"], ["le"], axis=0),              # [N, L, state]
             helper.make_node("ReduceSum", ["le", "ax1"], ["lv"], keepdims=1),          # [N, 1, state]
             helper.make_node("Unsqueeze", ["lv", "ax0"], ["lv4"]),                         # [1, N, 1, state]
             helper.make_node("Add", ["in_n_layer_self_k_cache", "lv4"], ["out_n_layer_self_k_cache"]),
             helper.make_node("ReduceMean", ["out_n_layer_self_k_cache"], ["km"], axes=[0, 2], keepdims=0),  # [N, state]
             helper.make_node("MatMul", ["km", "proj"], ["kl"]),                            # [N, vocab]
             helper.make_node("Unsqueeze", ["kl", "ax1"], ["kl3"]),
             helper.make_node("Add", ["l3", "kl3"], ["logits"]),
             helper.make_node("Identity", ["in_n_layer_self_v_cache"], ["out_n_layer_self_v_cache"])]
    g = helper.make_graph(nodes, "decoder",
                          [helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", "L"]),
                           helper.make_tensor_value_info("in_n_layer_self_k_cache", TensorProto.FLOAT, [layers, "N", ctx, state]),
                           helper.make_tensor_value_info("in_n_layer_self_v_cache", TensorProto.FLOAT, [layers, "N", ctx, state]),
                           helper.make_tensor_value_info("n_layer_cross_k", TensorProto.FLOAT, [layers, "N", "T", state]),
                           helper.make_tensor_value_info("n_layer_cross_v", TensorProto.FLOAT, [layers, "N", "T", state]),
                           helper.make_tensor_value_info("offset", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "L", vocab]),
                           helper.make_tensor_value_info("out_n_layer_self_k_cache", TensorProto.FLOAT, [layers, "N", ctx, state]),
                           helper.make_tensor_value_info("out_n_layer_self_v_cache", TensorProto.FLOAT, [layers, "N", ctx, state])],
                          [init("emb", emb), init("bias", bias), init("onehot", onehot), init("cross", cross), const_i64("n11", [-1, 1, 1]),
                           init("lang_emb", lang_emb), init("proj", proj), const_i64("ax0", [0]), const_i64("ax1", [1])])
    save(g, os.path.join(out, prefix + "decoder.onnx"), {"model_type": meta["model_type"]})
    import base64
    write(os.path.join(out, prefix + "tokens.txt"),
          "".join("%s %d\n" % (base64.b64encode(p.encode()).decode(), i) for i, p in enumerate(pieces)))


def whisper_multi(out, seed):
    """A multilingual Whisper (see whisper)."""
    whisper(out, seed, multi=True)


def moonshine(out, seed):
    """Moonshine v1 (as offline-moonshine-model.cc runs it): the
    preprocessor maps audio [1, S] to features [1, T, D]; the encoder
    features and features_len [1] int32 to encoder_out [1, T, D]; the
    uncached decoder tokens [1, 1] int32, encoder_out and seq_len [1] int32
    to logits [1, 1, vocab] and the decoder's states; the cached decoder
    takes those states back and returns new ones. Greedy search starts at
    token 1 and stops at 2; the synthetic end grows with seq_len."""
    r = rng(seed)
    dim = 32
    toks = ["<unk>", "<s>", "</s>"] + ASR_PIECES[1:]
    vocab = len(toks)
    conv = (r.standard_normal((dim, 1, 384)) / np.sqrt(384) * 40).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Unsqueeze", ["audio_signal", "ax1"], ["a3"]),
         helper.make_node("Conv", ["a3", "conv"], ["c"], strides=[384]),
         helper.make_node("Transpose", ["c"], ["features"], perm=[0, 2, 1])],
        "preprocessor", [helper.make_tensor_value_info("audio_signal", TensorProto.FLOAT, [1, "S"])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, "T", dim])],
        [init("conv", conv), const_i64("ax1", [1])])
    save(g, os.path.join(out, "preprocess.onnx"), {"model_type": "moonshine"})
    w = (r.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["features", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["encoder_out"]),
         helper.make_node("Identity", ["features_len"], ["unused_len"])],
        "encoder", [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, "T", dim]),
                    helper.make_tensor_value_info("features_len", TensorProto.INT32, [1])],
        [helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, [1, "T", dim]),
         helper.make_tensor_value_info("unused_len", TensorProto.INT32, [1])], [init("w", w)])
    save(g, os.path.join(out, "encode.int8.onnx"), {"model_type": "moonshine"})
    emb = (r.standard_normal((vocab, vocab)) * 2).astype(np.float32)
    proj = (r.standard_normal((dim, vocab)) * 3).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[:2] = -30.0
    bias[2] = -5.0
    onehot = np.zeros(vocab, dtype=np.float32)
    onehot[2] = 0.5

    def decoder(name, cached):
        nodes = [helper.make_node("Cast", ["tokens"], ["t64"], to=TensorProto.INT64),
                 helper.make_node("Gather", ["emb", "t64"], ["e"], axis=0),
                 helper.make_node("Cast", ["seq_len"], ["sl"], to=TensorProto.FLOAT),
                 helper.make_node("Mul", ["sl", "onehot"], ["eo"]),
                 helper.make_node("Add", ["e", "eo"], ["l0"])]
        inputs = [helper.make_tensor_value_info("tokens", TensorProto.INT32, [1, 1]),
                  helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, [1, "T", dim]),
                  helper.make_tensor_value_info("seq_len", TensorProto.INT32, [1])]
        if cached:
            inputs.append(helper.make_tensor_value_info("state_in", TensorProto.FLOAT, [1, 1, dim]))
            nodes.append(helper.make_node("Identity", ["state_in"], ["state_out"]))
        else:
            nodes.append(helper.make_node("ReduceMean", ["encoder_out"], ["state_out"], axes=[1], keepdims=1))
        nodes += [helper.make_node("MatMul", ["state_out", "proj"], ["sp"]),
                  helper.make_node("Add", ["l0", "sp"], ["l1"]),
                  helper.make_node("Add", ["l1", "bias"], ["logits"])]
        g = helper.make_graph(nodes, name, inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
                               helper.make_tensor_value_info("state_out", TensorProto.FLOAT, [1, 1, dim])],
                              [init("emb", emb), init("proj", proj), init("bias", bias), init("onehot", onehot)])
        save(g, os.path.join(out, name + ".int8.onnx"), {"model_type": "moonshine"})

    decoder("uncached_decode", False)
    decoder("cached_decode", True)
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(toks)))


def canary(out, seed):
    """NeMo Canary (EncDecMultiTaskModel, canary-180m-flash's export, as
    offline-canary-model.cc runs it): the encoder maps features [1, T, 128]
    and their length to encoder states [1, T/8, H], the length and a mask;
    the decoder maps (token, position) [1, 2] int32, one growing state
    [1, t, H] per layer, the encoder states and mask to logits
    [1, 1, vocab] and the states one step longer. The prompt's tokens
    (<|startofcontext|>, ..., <|nodiarize|>) must be in tokens.txt."""
    r = rng(seed)
    feat, hid, layers = 128, 16, 1
    toks = ["<unk>"] + CANARY_SPECIALS + ASR_PIECES[1:]
    vocab = len(toks)
    w = (r.standard_normal((feat, hid)) / np.sqrt(feat)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Slice", ["x", "st", "en", "ax1", "step"], ["xs"]),
         helper.make_node("MatMul", ["xs", "w"], ["encoder_states"]),
         helper.make_node("Div", ["x_len", "eight"], ["encoded_lengths"]),
         helper.make_node("ReduceMean", ["encoder_states"], ["es"], axes=[2], keepdims=0),
         helper.make_node("Greater", ["es", "neg_inf"], ["encoder_mask"])],
        "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "T", feat]),
                    helper.make_tensor_value_info("x_len", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("encoder_states", TensorProto.FLOAT, [1, "T8", hid]),
         helper.make_tensor_value_info("encoded_lengths", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("encoder_mask", TensorProto.BOOL, [1, "T8"])],
        [init("w", w), const_i64("st", [0]), const_i64("en", [1 << 30]), const_i64("ax1", [1]), const_i64("step", [8]),
         const_i64("eight", [8]), const_f32("neg_inf", [-1e30])])
    save(g, os.path.join(out, "encoder.int8.onnx"), {
        "model_type": "EncDecMultiTaskModel", "vocab_size": vocab, "normalize_type": "per_feature",
        "subsampling_factor": 8, "feat_dim": feat, "num_decoder_layers": layers, "decoder_hidden_size": hid,
    })
    emb = (r.standard_normal((vocab, hid)) * 0.5).astype(np.float32)
    for t in ["<|en|>", "<|es|>", "<|de|>", "<|fr|>"]:
        emb[toks.index(t)] *= 16  # the prompt's language reaches the transcript
    out_w = (r.standard_normal((hid, vocab)) * 3).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[1:len(CANARY_SPECIALS) + 1] = -30.0  # no special token but the end
    bias[1] = -4.0
    onehot = np.zeros(vocab, dtype=np.float32)
    onehot[1] = 0.4
    nodes = [helper.make_node("Cast", ["decoder_input_ids"], ["ids"], to=TensorProto.INT64),
             helper.make_node("Slice", ["ids", "c0", "c1", "c1"], ["tok"]),    # [1, 1]
             helper.make_node("Slice", ["ids", "c1", "c2", "c1"], ["pos"]),    # [1, 1]
             helper.make_node("Gather", ["emb", "tok"], ["e"], axis=0),        # [1, 1, H]
             helper.make_node("ReduceMean", ["encoder_states"], ["em"], axes=[1], keepdims=1),  # [1, 1, H]
             helper.make_node("Add", ["e", "em"], ["h"]),
             helper.make_node("Concat", ["decoder_mems", "h"], ["new_mems"], axis=1),
             helper.make_node("ReduceMean", ["new_mems"], ["hm"], axes=[1], keepdims=1),
             helper.make_node("Tanh", ["hm"], ["ht"]),
             helper.make_node("MatMul", ["ht", "out_w"], ["l0"]),
             helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["posf", "c2"], ["pos3"]),
             helper.make_node("Mul", ["pos3", "onehot"], ["eo"]),
             helper.make_node("Add", ["l0", "eo"], ["l1"]),
             helper.make_node("Add", ["l1", "bias"], ["logits"])]
    g = helper.make_graph(nodes, "decoder",
                          [helper.make_tensor_value_info("decoder_input_ids", TensorProto.INT32, [1, 2]),
                           helper.make_tensor_value_info("decoder_mems", TensorProto.FLOAT, [1, "t", hid]),
                           helper.make_tensor_value_info("encoder_states", TensorProto.FLOAT, [1, "T8", hid]),
                           helper.make_tensor_value_info("encoder_mask", TensorProto.BOOL, [1, "T8"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
                           helper.make_tensor_value_info("new_mems", TensorProto.FLOAT, [1, "t1", hid])],
                          [init("emb", emb), init("out_w", out_w), init("bias", bias), init("onehot", onehot),
                           const_i64("c0", [0]), const_i64("c1", [1]), const_i64("c2", [2])])
    save(g, os.path.join(out, "decoder.int8.onnx"), {"model_type": "EncDecMultiTaskModel"})
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(toks)))


def moonshine_v2(out, seed):
    """Moonshine v2 (Hugging Face's export with a merged decoder, as
    offline-moonshine-model-v2.cc runs it; the release archives ship the
    same graphs in ORT format, encoder_model.ort and
    decoder_model_merged.ort): the encoder maps the audio [1, S] to
    last_hidden_state [1, S/384, D]; the merged decoder maps input_ids
    [1, 1] int64, encoder_hidden_states, four caches per layer
    (past_key_values.N.decoder.key/value, .encoder.key/value, [1, heads,
    seq, head_dim] with heads and head_dim declared) and use_cache_branch
    [1] bool to logits [1, 1, vocab] and the caches one step on. Greedy
    search starts at token 1 and stops at 2; the synthetic end grows with
    the decoder cache's length."""
    r = rng(seed)
    heads, hd = 2, 16
    dim = heads * hd
    toks = ["<unk>", "<s>", "</s>"] + ASR_PIECES[1:]
    vocab = len(toks)
    conv = (r.standard_normal((dim, 1, 384)) / np.sqrt(384) * 40).astype(np.float32)
    w = (r.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Unsqueeze", ["input_values", "ax1"], ["a3"]),
         helper.make_node("Conv", ["a3", "conv"], ["c"], strides=[384]),
         helper.make_node("Transpose", ["c"], ["f"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["f", "w"], ["m"]),
         helper.make_node("Tanh", ["m"], ["last_hidden_state"])],
        "encoder", [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, [1, "S"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "T", dim])],
        [init("conv", conv), init("w", w), const_i64("ax1", [1])])
    save(g, os.path.join(out, "encoder_model.onnx"), {"model_type": "moonshine-v2"})
    emb = (r.standard_normal((vocab, vocab)) * 2).astype(np.float32)
    proj = (r.standard_normal((dim, vocab)) * 3).astype(np.float32)
    embk = (r.standard_normal((vocab, dim)) * 0.5).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[:2] = -30.0
    bias[2] = -5.0
    onehot = np.zeros(vocab, dtype=np.float32)
    onehot[2] = 0.5
    kv = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, heads, "seq_" + name.replace(".", "_"), hd])
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["e"], axis=0),                     # [1, 1, V]
             helper.make_node("ReduceMean", ["encoder_hidden_states"], ["em"], axes=[1], keepdims=1),
             helper.make_node("MatMul", ["em", "proj"], ["ep"]),
             helper.make_node("Gather", ["embk", "input_ids"], ["k0"], axis=0),                   # [1, 1, D]
             helper.make_node("Reshape", ["k0", "kshape"], ["k1"]),                               # [1, 1, heads, hd]
             helper.make_node("Transpose", ["k1"], ["knew"], perm=[0, 2, 1, 3]),                  # [1, heads, 1, hd]
             helper.make_node("Concat", ["past_key_values.0.decoder.key", "knew"], ["present.0.decoder.key"], axis=2),
             helper.make_node("Concat", ["past_key_values.0.decoder.value", "knew"], ["present.0.decoder.value"], axis=2),
             helper.make_node("Reshape", ["encoder_hidden_states", "eshape"], ["es"]),           # [1, T, heads, hd]
             helper.make_node("Transpose", ["es"], ["present.0.encoder.key"], perm=[0, 2, 1, 3]),
             helper.make_node("Mul", ["present.0.encoder.key", "half"], ["present.0.encoder.value"]),
             helper.make_node("Shape", ["present.0.decoder.key"], ["ks"]),
             helper.make_node("Slice", ["ks", "two", "three"], ["len"]),
             helper.make_node("Cast", ["len"], ["lenf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["lenf", "onehot"], ["eo"]),
             helper.make_node("Add", ["e", "ep"], ["l0"]),
             helper.make_node("Add", ["l0", "eo"], ["l1"]),
             helper.make_node("Add", ["l1", "bias"], ["logits"])]
    g = helper.make_graph(
        nodes, "decoder_merged",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1]),
         helper.make_tensor_value_info("encoder_hidden_states", TensorProto.FLOAT, [1, "T", dim]),
         kv("past_key_values.0.decoder.key"), kv("past_key_values.0.decoder.value"),
         kv("past_key_values.0.encoder.key"), kv("past_key_values.0.encoder.value"),
         helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab]),
         kv("present.0.decoder.key"), kv("present.0.decoder.value"), kv("present.0.encoder.key"), kv("present.0.encoder.value")],
        [init("emb", emb), init("proj", proj), init("embk", embk), init("bias", bias), init("onehot", onehot),
         const_i64("kshape", [1, 1, heads, hd]), const_i64("eshape", [1, -1, heads, hd]), const_f32("half", [0.5]),
         const_i64("two", [2]), const_i64("three", [3])])
    save(g, os.path.join(out, "decoder_model_merged.onnx"), {"model_type": "moonshine-v2"})
    # v2's tokens.txt holds each piece base64-encoded (the library decodes
    # every symbol at load); a word's first piece starts with a space.
    import base64
    pieces = [t.replace("\u2581", " ") for t in toks]
    write(os.path.join(out, "tokens.txt"),
          "".join("%s %d\n" % (base64.b64encode(p.encode()).decode(), i) for i, p in enumerate(pieces)))
