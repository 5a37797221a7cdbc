#!/usr/bin/env python3
"""Synthetic sherpa-onnx checkpoints for Sluice's tests (backends/sherpa).

Writes, for one family, the files of sherpa-onnx's release layout with the
ONNX input and output names, shapes and metadata the library's model class
reads, and seeded random weights: the library loads them and runs them, the
audio or transcript they produce means nothing. Nothing is downloaded; it
needs Debian's python3-onnx and python3-numpy (make deps).

usage: synth.py FAMILY OUTDIR SEED
"""
import os
import sys

from asr import (canary, moonshine, moonshine_v2, nemo_ctc, nemo_transducer, offline_transducer, online_zipformer2, paraformer,
                 sense_voice, whisper, whisper_multi)
from online import online_nemo_ctc, online_paraformer
from speakers import diarization
from tts import kitten, kokoro, matcha, vits_piper


FAMILIES = {
    "nemo-tdt": lambda out, seed: nemo_transducer(out, seed, True),
    "diarization": diarization,
    "canary": canary,
    "moonshine": moonshine,
    "moonshine-v2": moonshine_v2,
    "whisper": whisper,
    "whisper-multi": whisper_multi,
    "matcha": matcha,
    "matcha-vocos": lambda out, seed: matcha(out, seed, "vocos"),
    "paraformer": paraformer,
    "kokoro": kokoro,
    "kokoro-multi": lambda out, seed: kokoro(out, seed, True),
    "kitten": kitten,
    "sense-voice": sense_voice,
    "offline-transducer": offline_transducer,
    "offline-transducer-bpe": lambda out, seed: offline_transducer(out, seed, True),
    "online-zipformer2": online_zipformer2,
    "online-zipformer2-bpe": lambda out, seed: online_zipformer2(out, seed, True),
    "online-nemo-ctc": online_nemo_ctc,
    "online-paraformer": online_paraformer,
    "nemo-ctc": nemo_ctc,
    "vits-piper": lambda out, seed: vits_piper(out, seed, 1),
    "vits-piper-multi": lambda out, seed: vits_piper(out, seed, 3),
}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in FAMILIES:
        sys.exit("usage: synth.py {%s} OUTDIR SEED" % ",".join(sorted(FAMILIES)))
    fam, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    FAMILIES[fam](out, seed)


if __name__ == "__main__":
    main()
