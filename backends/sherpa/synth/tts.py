"""Synthetic voices: Piper (VITS), Kokoro, Matcha with a HiFi-GAN vocoder."""
import os

import numpy as np
from onnx import TensorProto, helper

from common import *  # noqa: F401,F403 (the helpers and alphabets)

def vits_piper(out, seed, speakers):
    """Piper VITS: input [1,T] int64, input_lengths [1], scales [3]
    (noise, length, noise_w), sid [1] when multi-speaker; output [1,1,N]
    audio at 22050 Hz, N = T * hop * length_scale."""
    r = rng(seed)
    hop = 256
    vocab = len(PIPER_SYMBOLS)
    inits = [init("emb", (r.standard_normal((vocab, hop)) * 0.8).astype(np.float32)),
             init("mix", (r.standard_normal((hop, hop)) / np.sqrt(hop)).astype(np.float32)),
             const_i64("flat_shape", [1, 1, -1]), const_i64("s1", [1]), const_i64("s2", [2]),
             const_i64("ax0", [0]), const_f32("ones2", [1.0, 1.0]), const_f32("half", [0.5])]
    nodes = [helper.make_node("Gather", ["emb", "input"], ["e"], axis=0)]
    inputs = [helper.make_tensor_value_info("input", TensorProto.INT64, [1, "T"]),
              helper.make_tensor_value_info("input_lengths", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3])]
    x = "e"
    if speakers > 1:
        inputs.append(helper.make_tensor_value_info("sid", TensorProto.INT64, [1]))
        inits.append(init("spk", (r.standard_normal((speakers, hop)) * 0.8).astype(np.float32)))
        nodes += [helper.make_node("Gather", ["spk", "sid"], ["sv"], axis=0),
                  helper.make_node("Add", ["e", "sv"], ["es"])]
        x = "es"
    nodes += [helper.make_node("MatMul", [x, "mix"], ["m"]),
              helper.make_node("Tanh", ["m"], ["t"]),
              helper.make_node("Mul", ["t", "half"], ["th"]),
              helper.make_node("Reshape", ["th", "flat_shape"], ["flat"]),
              helper.make_node("Slice", ["scales", "s1", "s2", "ax0"], ["ls"]),
              helper.make_node("Concat", ["ones2", "ls"], ["rs"], axis=0),
              helper.make_node("Resize", ["flat", "", "rs"], ["output"], mode="linear")]
    g = helper.make_graph(nodes, "piper", inputs,
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, "N"])], inits)
    save(g, os.path.join(out, "model.onnx"), {
        "model_type": "vits", "comment": "piper", "language": "English", "voice": "en-us",
        "has_espeak": 1, "n_speakers": speakers, "sample_rate": 22050,
    })
    lines = []
    for i, s in enumerate(PIPER_SYMBOLS):
        lines.append(("%d" % i) if s == " " else "%s %d" % (s, i))
    write(os.path.join(out, "tokens.txt"), "\n".join(lines) + "\n")


# A recognizer's vocabulary: SentencePiece-like pieces ("▁" starts a word).


def kokoro(out, seed, multi=False):
    """Kokoro v0.19 (English, metadata version 1, as
    offline-tts-kokoro-model.cc runs it): tokens [1, T] int64 (0 pads both
    ends), style [1, D] float (the speaker's row of voices.bin for this
    length), speed [1]; audio [N] at 24 kHz, N = T * hop / speed. voices.bin
    is float32 [n_speakers, max_token_len, 1, D] (metadata style_dim)."""
    r = rng(seed)
    hop, dim, max_len = 300, 32, 64
    speakers = ["af_synth", "am_synth"]
    symbols = ["$"] + [s for s in PIPER_SYMBOLS if s not in ("_", "^", "$")]
    if multi:
        # kokoro-multi-lang-v1_0: metadata version 2, lexicons, voices
        # named by Kokoro's convention (first letter: a American English,
        # e Spanish, z Mandarin); the front end looks these punctuation
        # marks up unchecked.
        speakers = ["af_synth", "ef_synth", "zf_synth"]
        symbols += [c for c in "\u2014\u2026\"\u201c\u201d" if c not in symbols]
    vocab = len(symbols)
    inits = [init("emb", (r.standard_normal((vocab, hop)) * 0.8).astype(np.float32)),
             init("proj", (r.standard_normal((dim, hop)) * 0.8).astype(np.float32)),
             const_i64("flat_shape", [1, 1, -1]), const_i64("out_shape", [-1]), const_f32("ones2", [1.0, 1.0]),
             const_f32("one", [1.0]), const_f32("half", [0.5])]
    nodes = [helper.make_node("Gather", ["emb", "tokens"], ["e"], axis=0),
             helper.make_node("MatMul", ["style", "proj"], ["sv"]),
             helper.make_node("Add", ["e", "sv"], ["es"]),
             helper.make_node("Tanh", ["es"], ["t"]),
             helper.make_node("Mul", ["t", "half"], ["th"]),
             helper.make_node("Reshape", ["th", "flat_shape"], ["flat"]),
             helper.make_node("Div", ["one", "speed"], ["ls"]),
             helper.make_node("Concat", ["ones2", "ls"], ["rs"], axis=0),
             helper.make_node("Resize", ["flat", "", "rs"], ["res"], mode="linear"),
             helper.make_node("Reshape", ["res", "out_shape"], ["audio"])]
    g = helper.make_graph(nodes, "kokoro",
                          [helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "T"]),
                           helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, dim]),
                           helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["N"])], inits)
    if multi:
        write(os.path.join(out, "lexicon-us-en.txt"), "hello h ə l ˈ o ʊ\nworld w ˈ ɜ ː l d\nsluice s l ˈ u ː s\n")
        write(os.path.join(out, "lexicon-zh.txt"), "你 n i\n好 x a ʊ\n世 ʂ ɻ\n界 t ɕ j ɛ\n")
    save(g, os.path.join(out, "model.onnx"), {
        "model_type": "style_text_to_speech_2", "version": 2 if multi else 1, "sample_rate": 24000, "n_speakers": len(speakers),
        "has_espeak": 1, "voice": "en-us", "style_dim": "%d,1,%d" % (max_len, dim),
        "speaker_names": ",".join(speakers), "language": "English",
    })
    voices = (r.standard_normal((len(speakers), max_len, 1, dim)) * 0.5).astype(np.float32)
    with open(os.path.join(out, "voices.bin"), "wb") as f:
        f.write(voices.tobytes())
    write(os.path.join(out, "tokens.txt"), "".join(("%d\n" % i) if t == " " else "%s %d\n" % (t, i) for i, t in enumerate(symbols)))


def matcha(out, seed, vocoder="hifigan"):
    """Matcha-TTS (icefall's English export, as offline-tts-matcha-model.cc
    runs it) with a HiFi-GAN vocoder: the acoustic model maps x [1, T],
    x_length [1], noise_scale [1], length_scale [1] to mel [1, 80, F]
    (F = 4 T length_scale); the vocoder (metadata model_type hifigan) maps
    mel to audio [1, 256 F] at 22.05 kHz."""
    r = rng(seed)
    vocab = len(PIPER_SYMBOLS)
    inits = [init("emb", (r.standard_normal((vocab, 320)) * 0.5).astype(np.float32)),
             const_i64("mel_shape", [1, -1, 80]), const_f32("ones2", [1.0, 1.0])]
    nodes = [helper.make_node("Gather", ["emb", "x"], ["e"], axis=0),
             helper.make_node("Reshape", ["e", "mel_shape"], ["m"]),
             helper.make_node("Transpose", ["m"], ["mt"], perm=[0, 2, 1]),
             helper.make_node("Concat", ["ones2", "length_scale"], ["rs"], axis=0),
             helper.make_node("Resize", ["mt", "", "rs"], ["mel"], mode="linear")]
    g = helper.make_graph(nodes, "matcha",
                          [helper.make_tensor_value_info("x", TensorProto.INT64, [1, "T"]),
                           helper.make_tensor_value_info("x_length", TensorProto.INT64, [1]),
                           helper.make_tensor_value_info("noise_scale", TensorProto.FLOAT, [1]),
                           helper.make_tensor_value_info("length_scale", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("mel", TensorProto.FLOAT, [1, 80, "F"])], inits)
    save(g, os.path.join(out, "model-steps-3.onnx"), {
        "model_type": "matcha-tts", "language": "English", "voice": "en-us", "has_espeak": 1, "n_speakers": 1,
        "sample_rate": 22050, "use_eos_bos": 1, "pad_id": 0, "version": 1,
    })
    if vocoder == "vocos":
        vocos(os.path.join(out, "vocos-22khz-univ.onnx"), r)
        write(os.path.join(out, "tokens.txt"), "".join(("%d\n" % i) if t == " " else "%s %d\n" % (t, i) for i, t in enumerate(PIPER_SYMBOLS)))
        return
    w = (r.standard_normal((80, 256)) / np.sqrt(80)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Transpose", ["mel"], ["mt"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["mt", "w"], ["a"]),
         helper.make_node("Tanh", ["a"], ["at"]),
         helper.make_node("Mul", ["at", "half"], ["ah"]),
         helper.make_node("Reshape", ["ah", "flat"], ["audio"])],
        "hifigan", [helper.make_tensor_value_info("mel", TensorProto.FLOAT, [1, 80, "F"])],
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, "N"])],
        [init("w", w), const_f32("half", [0.5]), const_i64("flat", [1, -1])])
    save(g, os.path.join(out, "hifigan_v2.onnx"), {"model_type": "hifigan", "sample_rate": 22050})
    write(os.path.join(out, "tokens.txt"), "".join(("%d\n" % i) if t == " " else "%s %d\n" % (t, i) for i, t in enumerate(PIPER_SYMBOLS)))


def kitten(out, seed):
    """KittenTTS (kitten-nano-en-v0_1's export, as offline-tts-kitten-model.cc
    runs it): input_ids [1, T] int64 (start_id and end_id around the
    phonemes), style [1, D] float (the speaker's row of voices.bin), speed
    [1]; waveform [N] at 24 kHz. voices.bin is float32 [n_speakers, rows,
    D] (metadata style_dim "rows,D"); tokens.txt is Kokoro's alphabet (the
    space after every '.', so it must be present)."""
    r = rng(seed)
    hop, dim, rows = 240, 32, 1
    speakers = ["expr-voice-2-m", "expr-voice-2-f", "expr-voice-3-m"]
    symbols = ["$"] + [s for s in PIPER_SYMBOLS if s not in ("_", "^", "$")]
    vocab = len(symbols)
    inits = [init("emb", (r.standard_normal((vocab, hop)) * 0.8).astype(np.float32)),
             init("proj", (r.standard_normal((dim, hop)) * 0.8).astype(np.float32)),
             const_i64("flat_shape", [1, 1, -1]), const_i64("out_shape", [-1]), const_f32("ones2", [1.0, 1.0]),
             const_f32("one", [1.0]), const_f32("half", [0.4])]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["e"], axis=0),
             helper.make_node("MatMul", ["style", "proj"], ["sv"]),
             helper.make_node("Add", ["e", "sv"], ["es"]),
             helper.make_node("Sin", ["es"], ["t"]),
             helper.make_node("Mul", ["t", "half"], ["th"]),
             helper.make_node("Reshape", ["th", "flat_shape"], ["flat"]),
             helper.make_node("Div", ["one", "speed"], ["ls"]),
             helper.make_node("Concat", ["ones2", "ls"], ["rs"], axis=0),
             helper.make_node("Resize", ["flat", "", "rs"], ["res"], mode="linear"),
             helper.make_node("Reshape", ["res", "out_shape"], ["waveform"])]
    g = helper.make_graph(nodes, "kitten",
                          [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"]),
                           helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, dim]),
                           helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("waveform", TensorProto.FLOAT, ["N"])], inits)
    save(g, os.path.join(out, "model.fp16.onnx"), {
        "model_type": "kitten-tts", "version": 1, "sample_rate": 24000, "n_speakers": len(speakers),
        "has_espeak": 1, "voice": "en-us", "style_dim": "%d,%d" % (rows, dim),
        "speaker_names": ",".join(speakers), "language": "English",
    })
    voices = (r.standard_normal((len(speakers), rows, dim)) * 0.5).astype(np.float32)
    with open(os.path.join(out, "voices.bin"), "wb") as f:
        f.write(voices.tobytes())
    write(os.path.join(out, "tokens.txt"), "".join(("%d\n" % i) if t == " " else "%s %d\n" % (t, i) for i, t in enumerate(symbols)))


def vocos(path, r):
    """The Vocos vocoder as sherpa-onnx's vocoder-models release exports it
    (vocos-22khz-univ.onnx, run by vocos-vocoder.cc): mels [1, 80, F] to
    the STFT's magnitude and the phase's cosine and sine, mag, x and y
    [1, n_fft/2 + 1, F]; the library's inverse STFT (metadata n_fft,
    hop_length, win_length, window_type) makes hop_length x F samples."""
    n_fft, hop = 1024, 256
    bins = n_fft // 2 + 1
    wm = (r.standard_normal((80, bins)) / np.sqrt(80)).astype(np.float32)
    wp = (r.standard_normal((80, bins)) * 3 / np.sqrt(80)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Transpose", ["mels"], ["mt"], perm=[0, 2, 1]),       # [1, F, 80]
         helper.make_node("MatMul", ["mt", "wm"], ["m1"]),
         helper.make_node("Tanh", ["m1"], ["m2"]),
         helper.make_node("Mul", ["m2", "two"], ["m3"]),
         helper.make_node("Sub", ["m3", "three"], ["m4"]),
         helper.make_node("Exp", ["m4"], ["m5"]),
         helper.make_node("Transpose", ["m5"], ["mag"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["mt", "wp"], ["p1"]),
         helper.make_node("Transpose", ["p1"], ["p"], perm=[0, 2, 1]),
         helper.make_node("Cos", ["p"], ["x"]),
         helper.make_node("Sin", ["p"], ["y"])],
        "vocos", [helper.make_tensor_value_info("mels", TensorProto.FLOAT, [1, 80, "F"])],
        [helper.make_tensor_value_info("mag", TensorProto.FLOAT, [1, bins, "F"]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, bins, "F"]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, bins, "F"])],
        [init("wm", wm), init("wp", wp), const_f32("two", [2.0]), const_f32("three", [3.0])])
    save(g, path, {"model_type": "vocos", "n_fft": n_fft, "hop_length": hop, "win_length": n_fft, "center": 1,
                   "normalized": 0, "window_type": "hann", "pad_mode": "reflect", "sample_rate": 22050})
