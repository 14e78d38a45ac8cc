"""The dequantizer's worker: transformers reads a pinned GGUF (`from_pretrained(folder, gguf_file=NAME)`, every
weight unpacked to float32) and writes the model and its tokenizer in HF form. Run under the vLLM environment's
python (harness.live.dequantized spawns this file by path), so it imports nothing from harness.

    python dequantize_worker.py GGUF OUT

prints one JSON line: {"model_class", "architecture", "dtype", "transformers", "seconds"} once OUT is written,
or {"error": "Type: message"} (exit 1) when transformers cannot read or dequantize the file (an architecture it
lacks), the words the rows of that model then carry."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def dequantize(gguf: Path, out: Path) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # dequantize=True: plain dense weights (else transformers keeps GGUF blocks, which it refuses to save).
    # float32: a Q4 weight is an f16 scale times a small integer (plus an f16 minimum), exact in float32 and
    # rounded in bf16's 8-bit mantissa; and both HF runtimes serve in float32 on CPU (--dtype float32).
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                 quantization_config=GgufConfig(dequantize=True))
    # The weights are dense now; the quantizer's mark would make save_pretrained refuse and the servers look for
    # GGUF blocks.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return {"model_class": type(model).__name__, "architecture": model.config.model_type,
            "dtype": str(model.dtype).removeprefix("torch."), "transformers": transformers.__version__,
            "seconds": round(time.monotonic() - started, 1)}


def main(argv: list) -> int:
    gguf, out = Path(argv[0]), Path(argv[1])
    try:
        answer = dequantize(gguf, out)
    except Exception as exc:  # noqa: BLE001 - whatever transformers raises is the row's words
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
