"""The HF worker: transformers on a scripted model's HF folder (harness.scripted.hf_form), run under the vLLM
environment's python (harness.peers.vllm_cpu spawns this file by path), so it imports nothing from harness.
One JSON request per line on stdin, one JSON answer per line on stdout:

  {"op": "logits", "folder", "ids", "positions", "top"} -> {"at": [{"argmax", "top": [[id, logit], ...]}, ...]}
      the logits after ids[p] for each p in positions, from one forward pass over ids
  {"op": "tokenize", "folder", "texts"} -> {"ids": [[...], ...]}  (special tokens parsed, no BOS added: a chat
      server tokenizes its rendered prompt that way)

A request that fails answers {"error": "Type: message"}."""

from __future__ import annotations


_loaded: dict = {}


def _model(folder: str):
    if ("model", folder) not in _loaded:
        import torch
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32)
        model.eval()
        _loaded[("model", folder)] = model
    return _loaded[("model", folder)]


def _tokenizer(folder: str):
    if ("tok", folder) not in _loaded:
        from transformers import AutoTokenizer

        _loaded[("tok", folder)] = AutoTokenizer.from_pretrained(folder)
    return _loaded[("tok", folder)]


def logits(req: dict) -> dict:
    import torch

    with torch.no_grad():
        out = _model(req["folder"])(torch.tensor([req["ids"]])).logits[0]
    at = []
    for p in req["positions"]:
        values, ids = torch.topk(out[p], req.get("top", 3))
        at.append({"argmax": int(ids[0]), "top": [[int(i), float(v)] for i, v in zip(ids, values)]})
    return {"at": at}


def tokenize(req: dict) -> dict:
    tok = _tokenizer(req["folder"])
    return {"ids": [tok(t, add_special_tokens=False)["input_ids"] for t in req["texts"]]}


def main() -> None:
    from lines import serve     # beside this file: run by path, its folder is first on sys.path

    ops = {"logits": logits, "tokenize": tokenize}
    serve(lambda req: ops[req["op"]](req))


if __name__ == "__main__":
    main()
