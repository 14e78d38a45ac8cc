#!/usr/bin/env python3
"""Why a model served by llama-server writes other text than the same model in process, on the same prompt.

The deployment page counts how often the served model wrote the in-process native reply (results/deployment.md,
"Replays beside served"): the same GGUF, the same llama.cpp sources, the same template and greedy sampling, yet
the texts part. This asks each drawn BFCL case of the deployment suite (the prompt the server renders itself,
/apply-template) of the vendored llama-server and of the in-process backend (llama-cpp-python's Llama.generate,
harness.backends.embedded), one setting changed at a time, and prints how often the two wrote the same text:

- as run: the server's defaults (flash attention "auto": on, on CPU) and the suite's sampling (repeat penalty
  1.1), against the in-process run with the same sampling (its flash attention off, llama-cpp-python's default);
- flash attention off on the server (`-fa off`), the same sampling;
- flash attention off and no repeat penalty (1.0) on both sides: llama-server's penalty window counts the
  prompt's tokens, Llama.generate's only the reply's.

    python tools/served_vs_in_process.py [--model smollm2-135m-instruct-q4_1] [--cases 1] [--max-tokens 400]

Both run on one thread, greedy (temperature 0), seed 0. Prints one line per case and setting, then the counts."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.backends import runtimes  # noqa: E402
from harness.backends.chat_answers import chat_answer  # noqa: E402
from harness.backends.embedded.generate import generate, load_model  # noqa: E402
from harness.backends.servers import LocalServer  # noqa: E402
from harness.live.opening import N_CTX  # noqa: E402
from harness.pins.sources import model_path  # noqa: E402
from harness.suites.deployment import cases as asked  # noqa: E402

SERVER = "llama-server"
TIMEOUT = 600.0
# (name, server flags, repeat penalty): each a change from the one before.
SETTINGS = (("as run", [], 1.1), ("server flash attention off", ["-fa", "off"], 1.1),
            ("flash attention off, no repeat penalty", ["-fa", "off"], 1.0))


def served_text(server: LocalServer, model: str, body: dict) -> str | None:
    answer = chat_answer(f"{server.base_url}/v1/chat/completions",
                         {**body, "model": model, **runtimes.get(SERVER).shown_fields,
                          **runtimes.get(SERVER).fresh_fields}, TIMEOUT)
    return answer.get("generated")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct-q4_1")
    parser.add_argument("--cases", type=int, default=1, help="cases per BFCL category (the deployment draw)")
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args()
    gguf = model_path(args.model)
    drawn = asked.cases(args.cases)
    requests, ids = [asked.body(case, asked.AUTO) for case in drawn], [case.id for case in drawn]
    llm = load_model(gguf, n_ctx=N_CTX, n_threads=1)
    same = {name: 0 for name, _, _ in SETTINGS}
    written = {}      # (prompt, repeat penalty) -> the in-process text: greedy, so the same request writes it again
    with tempfile.TemporaryDirectory(prefix="served-vs-in-process-") as tmp:
        for name, flags, penalty in SETTINGS:
            server = LocalServer(SERVER, gguf, alias=args.model, n_ctx=N_CTX, threads=1, seed=asked.SEED,
                                 extra_args=flags, log_path=Path(tmp) / f"{len(flags)}.log", ready_timeout=300)
            server.start()
            try:
                for case_id, body in zip(ids, requests):
                    body = {**body, "repeat_penalty": penalty, "max_tokens": args.max_tokens}
                    key = runtimes.get(SERVER).prompt_key(server.base_url, args.model, {**body, "model": args.model},
                                                          TIMEOUT)
                    if key.prompt is None:
                        print(f"{case_id}\t{name}\tno prompt from the server: {key.error}", flush=True)
                        continue
                    served = served_text(server, args.model, body)
                    if (key.prompt, penalty) not in written:
                        written[key.prompt, penalty] = generate(
                            llm, key.prompt, max_tokens=args.max_tokens, temperature=body["temperature"],
                            top_p=body["top_p"], top_k=body["top_k"], min_p=body["min_p"], repeat_penalty=penalty,
                            seed=asked.SEED).text
                    mine = written[key.prompt, penalty]
                    alike = served == mine
                    same[name] += alike
                    where = ("" if alike or served is None else
                             f" (apart from character {len(os.path.commonprefix([served, mine]))})")
                    print(f"{case_id}\t{name}\t{'same' if alike else 'other text'}{where}", flush=True)
            finally:
                server.stop()
    print()
    for name, _, _ in SETTINGS:
        print(f"{args.model}: {name}: the same text in {same[name]}/{len(ids)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
