"""Shared pieces of the synthetic sherpa-onnx checkpoints (synth.py):
ONNX helpers, the phoneme and token alphabets, the transducer decoder and
joiner that several families use."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13

# Piper's phoneme alphabet is eSpeak NG's IPA output; this is a subset with
# the specials sherpa-onnx's Piper front end requires (_ pad, ^ bos, $ eos).


PIPER_SYMBOLS = (["_", "^", "$", " "] + list("!'(),-.:;?") + list("abcdefghijklmnopqrstuvwxyz")
                 + list("æçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɝɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ")
                 + ["\u0303", "\u0329", "\u032a", "\u032f", "\u0361"])


def rng(seed):
    return np.random.default_rng(seed)


def init(name, arr):
    return numpy_helper.from_array(np.ascontiguousarray(arr), name)


def const_i64(name, vals):
    return init(name, np.array(vals, dtype=np.int64))


def const_f32(name, vals):
    return init(name, np.array(vals, dtype=np.float32))


def save(graph, path, meta):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="sluice-synth")
    model.ir_version = 8
    for k, v in meta.items():
        e = model.metadata_props.add()
        e.key, e.value = k, str(v)
    onnx.checker.check_model(model)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(tmp, path)


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


ASR_PIECES = ["<unk>"] + ["\u2581" + w for w in
                          "the a of to and in is it you that he was for on are with as i his they be at one have this".split()] + \
    list("abcdefghijklmnopqrstuvwxyz'")


def asr_tokens(out, blank_last, pieces=ASR_PIECES):
    toks = list(pieces)
    toks = toks + ["<blk>"] if blank_last else ["<blk>"] + toks
    write(os.path.join(out, "tokens.txt"), "".join("%s %d\n" % (t, i) for i, t in enumerate(toks)))
    return len(toks)


# A BPE vocabulary's pieces: ASR_PIECES and the bare word boundary, so
# that any word of letters spells as "\u2581" and its letters.
BPE_PIECES = ASR_PIECES + ["\u2581"]


def bpe_vocab(out):
    """bpe.vocab as sherpa-onnx's export_bpe_vocab.py writes it from
    bpe.model: "piece<TAB>score" per line, the specials scored 0, whole
    words above letters, so a word's own piece wins over its spelling."""
    lines = ["<blk>\t0", "<unk>\t0"]
    for p in BPE_PIECES[1:]:
        lines.append("%s\t%s" % (p, "-2.5" if p.startswith("\u2581") and len(p) > 1 else "-3.25"))
    write(os.path.join(out, "bpe.vocab"), "\n".join(lines) + "\n")


SENSE_VOICE_TAGS = ["<|zh|>", "<|en|>", "<|yue|>", "<|ja|>", "<|ko|>", "<|nospeech|>", "<|HAPPY|>", "<|NEUTRAL|>",
                    "<|Speech|>", "<|BGM|>", "<|withitn|>", "<|woitn|>"]


CANARY_SPECIALS = ["<|endoftext|>", "<|startofcontext|>", "<|startoftranscript|>", "<|emo:undefined|>", "<|en|>", "<|es|>",
                   "<|de|>", "<|fr|>", "<|pnc|>", "<|nopnc|>", "<|noitn|>", "<|notimestamp|>", "<|nodiarize|>"]


def transducer_decoder_joiner(out, r, vocab, dim, context=2, decoder_name="decoder.onnx", joiner_name="joiner.onnx"):
    """icefall's stateless decoder (y [N, context] int64 -> decoder_out
    [N, dim]) and joiner (encoder_out [N, dim], decoder_out [N, dim] ->
    logit [N, vocab]), as sherpa-onnx's transducer models run them; the
    blank is token 0."""
    emb = (r.standard_normal((vocab, dim)) * 0.5).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gather", ["emb", "y"], ["e"], axis=0),
         helper.make_node("ReduceSum", ["e", "ax1"], ["decoder_out"], keepdims=0)],
        "decoder", [helper.make_tensor_value_info("y", TensorProto.INT64, ["N", context])],
        [helper.make_tensor_value_info("decoder_out", TensorProto.FLOAT, ["N", dim])],
        [init("emb", emb), const_i64("ax1", [1])])
    save(g, os.path.join(out, decoder_name), {"vocab_size": vocab, "context_size": context})
    w = (r.standard_normal((dim, vocab)) * 2 / np.sqrt(dim)).astype(np.float32)
    bias = np.zeros(vocab, dtype=np.float32)
    bias[0] = 2.0  # blank often enough that words come out separated
    g = helper.make_graph(
        [helper.make_node("Add", ["encoder_out", "decoder_out"], ["s"]),
         helper.make_node("Tanh", ["s"], ["t"]),
         helper.make_node("MatMul", ["t", "w"], ["l"]),
         helper.make_node("Add", ["l", "bias"], ["logit"])],
        "joiner", [helper.make_tensor_value_info("encoder_out", TensorProto.FLOAT, ["N", dim]),
                   helper.make_tensor_value_info("decoder_out", TensorProto.FLOAT, ["N", dim])],
        [helper.make_tensor_value_info("logit", TensorProto.FLOAT, ["N", vocab])],
        [init("w", w), init("bias", bias)])
    save(g, os.path.join(out, joiner_name), {"joiner_dim": dim})
