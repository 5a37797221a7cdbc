"""Synthetic streaming recognizers beyond the Zipformer2 transducer: NeMo's
cache-aware streaming CTC and FunASR's streaming Paraformer."""
import os

import numpy as np
from onnx import TensorProto, helper

from common import *  # noqa: F401,F403 (the helpers and alphabets)


def online_nemo_ctc(out, seed):
    """NeMo cache-aware streaming CTC (FastConformer hybrid, exported for
    sherpa-onnx as online-nemo-ctc-model.cc runs it): audio_signal
    [B, 80, window_size], length [B] int64, cache_last_channel [B, d1, d2,
    d3], cache_last_time [B, t1, t2, t3] and cache_last_channel_len [B]
    int64 in that order; logprobs [B, T', V], encoded_lengths and the
    three caches out. The library advances chunk_shift frames per call.
    The synthetic model emits one frame per chunk (its first chunk_shift
    frames, subsampled by 8) and keeps the chunk's last frame in
    cache_last_time, which the next chunk's logits read: a stream's state
    matters, as a real model's does. Blank last (<blk>)."""
    r = rng(seed)
    vocab = len(ASR_PIECES) + 1
    hidden, window, shift = 128, 16, 8
    d1, d2, d3 = 2, 4, 8
    inits = [init("w1", (r.standard_normal((80, hidden)) / np.sqrt(80)).astype(np.float32)),
             init("w2", (r.standard_normal((hidden, vocab)) * 2 / np.sqrt(hidden)).astype(np.float32)),
             init("wc", (r.standard_normal((80, vocab)) * 0.3 / np.sqrt(80)).astype(np.float32)),
             init("bias", np.concatenate([np.zeros(vocab - 1), [1.5]]).astype(np.float32)),
             const_i64("st", [0]), const_i64("en", [shift]), const_i64("ax2", [2]), const_i64("step", [shift]),
             const_i64("last_st", [window - 1]), const_i64("last_en", [window]),
             const_i64("cache_shape", [-1, 1, 80]), const_i64("new_time_shape", [-1, 1, 80, 1]),
             const_i64("one", [1]), const_i64("eight", [8])]
    nodes = [helper.make_node("Slice", ["audio_signal", "st", "en", "ax2", "step"], ["xs"]),      # [B, 80, 1]
             helper.make_node("Transpose", ["xs"], ["xt"], perm=[0, 2, 1]),                       # [B, 1, 80]
             helper.make_node("MatMul", ["xt", "w1"], ["h"]),
             helper.make_node("Tanh", ["h"], ["ht"]),
             helper.make_node("MatMul", ["ht", "w2"], ["l"]),
             helper.make_node("Reshape", ["cache_last_time", "cache_shape"], ["ct"]),            # [B, 1, 80]
             helper.make_node("MatMul", ["ct", "wc"], ["lc"]),
             helper.make_node("Add", ["l", "lc"], ["l2"]),
             helper.make_node("Add", ["l2", "bias"], ["lb"]),
             helper.make_node("LogSoftmax", ["lb"], ["logprobs"], axis=-1),
             helper.make_node("Div", ["length", "eight"], ["encoded_lengths"]),
             helper.make_node("Slice", ["audio_signal", "last_st", "last_en", "ax2"], ["lastf"]),  # [B, 80, 1]
             helper.make_node("Reshape", ["lastf", "new_time_shape"], ["cache_last_time_next"]),
             helper.make_node("Identity", ["cache_last_channel"], ["cache_last_channel_next"]),
             helper.make_node("Add", ["cache_last_channel_len", "one"], ["cache_last_channel_len_next"])]
    g = helper.make_graph(
        nodes, "nemo_streaming_ctc",
        [helper.make_tensor_value_info("audio_signal", TensorProto.FLOAT, ["B", 80, window]),
         helper.make_tensor_value_info("length", TensorProto.INT64, ["B"]),
         helper.make_tensor_value_info("cache_last_channel", TensorProto.FLOAT, ["B", d1, d2, d3]),
         helper.make_tensor_value_info("cache_last_time", TensorProto.FLOAT, ["B", 1, 80, 1]),
         helper.make_tensor_value_info("cache_last_channel_len", TensorProto.INT64, ["B"])],
        [helper.make_tensor_value_info("logprobs", TensorProto.FLOAT, ["B", 1, vocab]),
         helper.make_tensor_value_info("encoded_lengths", TensorProto.INT64, ["B"]),
         helper.make_tensor_value_info("cache_last_channel_next", TensorProto.FLOAT, ["B", d1, d2, d3]),
         helper.make_tensor_value_info("cache_last_time_next", TensorProto.FLOAT, ["B", 1, 80, 1]),
         helper.make_tensor_value_info("cache_last_channel_len_next", TensorProto.INT64, ["B"])], inits)
    save(g, os.path.join(out, "model.onnx"), {
        "model_type": "EncDecHybridRNNTCTCBPEModel", "vocab_size": vocab, "window_size": window, "chunk_shift": shift,
        "subsampling_factor": 8, "normalize_type": "", "cache_last_channel_dim1": d1, "cache_last_channel_dim2": d2,
        "cache_last_channel_dim3": d3, "cache_last_time_dim1": 1, "cache_last_time_dim2": 80, "cache_last_time_dim3": 1,
        "comment": "synthetic cache-aware streaming CTC",
    })
    asr_tokens(out, blank_last=True)


def online_paraformer(out, seed):
    """FunASR's streaming Paraformer (paraformer-zh-streaming's export, as
    online-paraformer-model.cc and online-recognizer-paraformer-impl.h run
    it): encoder.onnx maps speech [1, T, 560] (61 fbank frames stacked 7
    every 6, CMVN and positional encoding applied, 8 cached frames before)
    and speech_lengths [1] int32 to encoder_out [1, T, D], encoder_out_lens
    and alphas [1, T] (the CIF weights: a token fires where they sum past
    1); decoder.onnx maps encoder_out, its length, acoustic_embeds
    [1, N, D], acoustic_embeds_len [1] int32 and decoder_num_blocks states
    [1, D, kernel - 1] to logits [1, N, V], sample_ids [1, N] int64 and the
    states. Token 0 (<blank>) is skipped. The synthetic decoder's states
    carry the mean of the embeddings so far, which its logits read."""
    r = rng(seed)
    toks = ["<blank>", "<s>", "</s>"] + ASR_PIECES[1:] + ["<unk>"]
    vocab = len(toks)
    d, kernel, blocks = 32, 11, 2
    we = (r.standard_normal((560, d)) / np.sqrt(560)).astype(np.float32)
    wa = (r.standard_normal((d, 1)) / np.sqrt(d)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["speech", "we"], ["eo"]),
         helper.make_node("Tanh", ["eo"], ["encoder_out"]),
         helper.make_node("Identity", ["speech_lengths"], ["encoder_out_lens"]),
         helper.make_node("MatMul", ["encoder_out", "wa"], ["a"]),         # [1, T, 1]
         helper.make_node("Sigmoid", ["a"], ["as"]),
         helper.make_node("Mul", ["as", "scale"], ["asc"]),
         helper.make_node("Squeeze", ["asc", "ax2"], ["alphas"])],
        "encoder", [helper.make_tensor_value_info("speech", TensorProto.FLOAT, [1, "T", 560]),
                    helper.make_tensor_value_info("speech_lengths", TensorProto.INT32, [1])],
        [helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, [1, "T", d]),
         helper.make_tensor_value_info("encoder_out_lens", TensorProto.INT32, [1]),
         helper.make_tensor_value_info("alphas", TensorProto.FLOAT, [1, "T"])],
        [init("we", we), init("wa", wa), const_f32("scale", [0.7]), const_i64("ax2", [2])])
    save(g, os.path.join(out, "encoder.onnx"), {
        "model_type": "paraformer", "version": 1, "vocab_size": vocab, "lfr_window_size": 7, "lfr_window_shift": 6,
        "encoder_output_size": d, "decoder_num_blocks": blocks, "decoder_kernel_size": kernel,
        "neg_mean": ",".join(["-8.0"] * 560), "inv_stddev": ",".join(["0.25"] * 560),
    })
    wd = (r.standard_normal((d, vocab)) * 4 / np.sqrt(d)).astype(np.float32)
    ws = (r.standard_normal((d, vocab)) * 1 / np.sqrt(d)).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[1:3] = -30  # <s> and </s> never
    nodes = [helper.make_node("MatMul", ["acoustic_embeds", "wd"], ["l0"]),
             helper.make_node("ReduceMean", ["in_cache_0"], ["sm"], axes=[2], keepdims=0),       # [1, D]
             helper.make_node("Unsqueeze", ["sm", "ax1"], ["sm3"]),                               # [1, 1, D]
             helper.make_node("MatMul", ["sm3", "ws"], ["ls"]),
             helper.make_node("Add", ["l0", "ls"], ["l1"]),
             helper.make_node("Add", ["l1", "bias"], ["logits"]),
             helper.make_node("ArgMax", ["logits"], ["sample_ids"], axis=2, keepdims=0),
             helper.make_node("ReduceMean", ["acoustic_embeds"], ["am"], axes=[1], keepdims=1),   # [1, 1, D]
             helper.make_node("Transpose", ["am"], ["amt"], perm=[0, 2, 1]),                       # [1, D, 1]
             helper.make_node("Mul", ["in_cache_0", "half"], ["h0"]),
             helper.make_node("Add", ["h0", "amt"], ["out_cache_0"])]
    inputs = [helper.make_tensor_value_info("enc", TensorProto.FLOAT, [1, "T", d]),
              helper.make_tensor_value_info("enc_len", TensorProto.INT32, [1]),
              helper.make_tensor_value_info("acoustic_embeds", TensorProto.FLOAT, [1, "N", d]),
              helper.make_tensor_value_info("acoustic_embeds_len", TensorProto.INT32, [1])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "N", vocab]),
               helper.make_tensor_value_info("sample_ids", TensorProto.INT64, [1, "N"])]
    for i in range(blocks):
        inputs.append(helper.make_tensor_value_info("in_cache_%d" % i, TensorProto.FLOAT, [1, d, kernel - 1]))
        outputs.append(helper.make_tensor_value_info("out_cache_%d" % i, TensorProto.FLOAT, [1, d, kernel - 1]))
        if i > 0:
            nodes.append(helper.make_node("Identity", ["in_cache_%d" % i], ["out_cache_%d" % i]))
    nodes.append(helper.make_node("Identity", ["enc"], ["unused_enc"]))
    nodes.append(helper.make_node("Identity", ["enc_len"], ["unused_len"]))
    g = helper.make_graph(nodes, "decoder", inputs, outputs,
                          [init("wd", wd), init("ws", ws), init("bias", bias), const_i64("ax1", [1]), const_f32("half", [0.5])])
    save(g, os.path.join(out, "decoder.onnx"), {"model_type": "paraformer"})
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(toks)))
