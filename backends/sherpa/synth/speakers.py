"""Synthetic speaker diarization: pyannote segmentation and a speaker
embedding extractor."""
import os

import numpy as np
from onnx import TensorProto, helper

from common import *  # noqa: F401,F403 (the helpers and alphabets)

def diarization(out, seed):
    """Speaker diarization as sherpa-onnx runs it: pyannote's segmentation
    model (segmentation-3.0's export: x [N, 1, 160000] -> y [N, 589, 7],
    log probabilities of the powerset classes of up to 3 speakers, 2 at
    once) and a speaker embedding extractor (3D-Speaker's export: x
    [N, T, 80] fbank -> embedding [N, 32])."""
    r = rng(seed)
    kernel, shift, window = 991, 270, 160000
    conv = (r.standard_normal((7, 1, kernel)) * 0.05).astype(np.float32)
    bias = np.array([1.0, 0.6, 0.6, 0.6, -1, -1, -1], dtype=np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "conv"], ["c"], strides=[shift]),
         helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1]),
         helper.make_node("Add", ["ct", "bias"], ["cb"]),
         helper.make_node("LogSoftmax", ["cb"], ["y"], axis=-1)],
        "segmentation", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "F", 7])], [init("conv", conv), init("bias", bias)])
    save(g, os.path.join(out, "segmentation.onnx"), {
        "model_type": "pyannote-segmentation-3.0", "sample_rate": 16000, "window_size": window,
        "receptive_field_size": kernel, "receptive_field_shift": shift, "num_speakers": 3, "powerset_max_classes": 2,
        "num_classes": 7, "model_author": "pyannote", "version": 1,
    })
    w = (r.standard_normal((80, 32)) * 0.5).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["ax"]),  # the features arrive mean-normalised (global-mean)
         helper.make_node("ReduceMean", ["ax"], ["m"], axes=[1], keepdims=0),
         helper.make_node("MatMul", ["m", "w"], ["embedding"])],
        "embedding", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", 80])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["N", 32])], [init("w", w)])
    save(g, os.path.join(out, "embedding.onnx"), {
        "framework": "3d-speaker", "sample_rate": 16000, "output_dim": 32, "normalize_samples": 1,
        "language": "English", "feature_normalize_type": "global-mean", "comment": "synthetic",
    })
