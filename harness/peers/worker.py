"""The peers worker: vLLM's and SGLang's own tool parsers, and transformers' response templates, driven through
their public entry points.

Runs under the peers environment's python (scripts/setup_peers.sh builds it; harness.peers spawns this
file by path), so it imports nothing from harness. One JSON request per line on stdin, one JSON answer per line
on stdout, in order:

  {"op": "hello"}  ->  {"python", "projects": {project: {"version"} or {"error"}}}
  {"op": "parse", "project", "parser", "tokenizer": GGUF path, "added_tokens", "reply", "tools", "splits", "seed"}
      -> {"tokens": n, "round_trip": bool, "one_shot": ANSWER, "whole": ANSWER, "by_token": ANSWER,
          "random": [ANSWER, ...], "random_sizes": [[1-4 tokens per chunk], ...]}
  {"op": "bench", "project", "parser", "tokenizer", "added_tokens", "replies", "tools", "repeat", "rounds"}
      -> {"seconds", "parsed", "errors"}: one-shot reads only, timed inside this process (no protocol cost);
      seconds of the fastest of `rounds` rounds (default 1), each reading the replies `repeat` times
  {"op": "detect", "project": "sglang", "template", "vocab": [token, ...]}
      -> {"tool_call_parser", "rule", "text_only", "reasoning_parser", "reasoning", "force_reasoning"}: SGLang's
      `--tool-call-parser auto` on a chat template (sglang.srt.parser.template_detection), its rules in its order:
      the parser, the rule that chose it, the parser the template text alone gives (an empty vocabulary), its
      reasoning parser and the reasoning toggle it reads from the template
  {"op": "detectors", "project": "sglang"} -> {"detectors": {parser name: its detector class}}
  ANSWER = {"content", "calls": [{"name", "arguments"}]} as the parser returned them (arguments as its string),
           or {"error": "Type: message"} where the parser raised.

A request that fails as a whole answers {"error"}. Streams are fed as the servers feed them: the reply's token
ids from the family's vocabulary (a real transformers tokenizer read from the vocabulary GGUF), text decoded
incrementally (a chunk that ends inside a UTF-8 character waits for the next), then the project's end-of-stream
steps of each project's server (vLLM: get_remaining_unstreamed_args; SGLang: parse_stream_end, then its serving
layer's check for the last call's unstreamed arguments; transformers: ResponseParser.finalize).

transformers' parser names are the model types of the response templates `transformers serve` falls back on
for tokenizers that ship none (no pinned template or vocabulary here ships one): qwen2 (<tool_call> JSON),
qwen3_5 (<tool_call><function=…> XML), gemma4.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import random
import sys

PROJECT_MODULES = {"vllm": "vllm.tool_parsers", "sglang": "sglang.srt.function_call.function_call_parser",
                   "transformers": "transformers.cli.serving.utils"}
_TOKENIZERS: dict = {}


def main() -> None:
    from lines import serve     # beside this file: run by path, its folder is first on sys.path

    serve(handle)     # vLLM's logger writes to stdout: serve keeps the real stdout for the answers


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def handle(request: dict) -> dict:
    op = request.get("op")
    if op == "hello":
        return {"python": sys.version.split()[0], "projects": {p: _project(p) for p in PROJECT_MODULES}}
    if op == "parse":
        return parse(request)
    if op == "bench":
        return bench(request)
    if op == "detect":
        return detect(request)
    if op == "detectors":
        from sglang.srt.function_call.function_call_parser import FunctionCallParser

        return {"detectors": {name: cls.__name__ for name, cls in FunctionCallParser.ToolCallParserEnum.items()}}
    raise ValueError(f"unknown op {op!r}")


def _project(name: str) -> dict:
    try:
        importlib.import_module(PROJECT_MODULES[name])
        return {"version": importlib.import_module(name).__version__}
    except Exception as exc:  # reported: which module does not import, and why
        return {"error": _error(exc)}


def tokenizer(path: str, added: tuple = (), config: tuple = ()):
    """The vocabulary GGUF read by transformers, with the family's special tokens it lacks added (a parser looks
    its markers up in the vocabulary; llama.cpp's generic vocabularies do not hold every family's) and the
    tokenizer_config.json entries of the family's real model that a GGUF does not carry (config: key, value pairs)."""
    if path not in _TOKENIZERS:
        from transformers import AutoTokenizer

        _TOKENIZERS[path] = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    key = (path, added, config)
    if key not in _TOKENIZERS:
        # Reading a GGUF vocabulary takes seconds; a copy with a family's tokens added, milliseconds.
        tok = copy.deepcopy(_TOKENIZERS[path])
        vocab = tok.get_vocab()
        tok.add_tokens([t for t in added if t not in vocab], special_tokens=True)
        tok.init_kwargs.update(dict(config))
        _TOKENIZERS[key] = tok
    return _TOKENIZERS[key]


def _request_tokenizer(request: dict):
    return tokenizer(request["tokenizer"], tuple(request.get("added_tokens") or ()),
                     tuple(sorted((request.get("tokenizer_config") or {}).items())))


def prefix_texts(tok, ids: list) -> list:
    """texts[k]: what a server has shown after k tokens. A prefix that ends inside a character decodes to U+FFFD
    there; the server holds it back until the character is whole."""
    texts = [""]
    for k in range(1, len(ids) + 1):
        text = tok.decode(ids[:k], skip_special_tokens=False, clean_up_tokenization_spaces=False)
        texts.append(text if not text.endswith("\ufffd") and text.startswith(texts[-1]) else texts[-1])
    return texts


def random_sizes(n: int, rng: random.Random) -> list:
    sizes, left = [], n
    while left > 0:
        sizes.append(min(left, rng.randint(1, 4)))
        left -= sizes[-1]
    return sizes


def parse(request: dict) -> dict:
    tok = _request_tokenizer(request)
    reply = request["reply"]
    ids = tok.encode(reply, add_special_tokens=False)
    texts = prefix_texts(tok, ids)
    if texts[-1] != reply:
        # The vocabulary cannot spell the reply exactly (a SentencePiece space prefix): stream what it decodes to.
        texts[-1] = reply
    driver = DRIVERS[request["project"]](request, tok)
    rng = random.Random(request.get("seed", 0))
    plans = [random_sizes(len(ids), rng) for _ in range(int(request.get("splits", 20)))]
    return {"tokens": len(ids), "round_trip": texts[-1] == tok.decode(ids, skip_special_tokens=False,
                                                                       clean_up_tokenization_spaces=False),
            "one_shot": _guarded(driver.one_shot, reply),
            "whole": _guarded(driver.stream, ids, texts, [len(ids)] if ids else []),
            "by_token": _guarded(driver.stream, ids, texts, [1] * len(ids)),
            "random": [_guarded(driver.stream, ids, texts, sizes) for sizes in plans],
            "random_sizes": plans}


def bench(request: dict) -> dict:
    import time

    tok = _request_tokenizer(request)
    driver = DRIVERS[request["project"]](request, tok)
    for reply in request["replies"]:  # warm-up: lazy imports and compiled patterns are not the parser's pace
        _guarded(driver.one_shot, reply)
    best = None
    # The fastest round: a pause of the machine's other work is not the parser's pace.
    for _ in range(max(1, int(request.get("rounds", 1)))):
        errors, parsed = 0, 0
        start = time.perf_counter()
        for _ in range(int(request.get("repeat", 1))):
            for reply in request["replies"]:
                errors += "error" in _guarded(driver.one_shot, reply)
                parsed += 1
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return {"seconds": best, "parsed": parsed, "errors": errors}


def detect(request: dict) -> dict:
    """SGLang's template detection as resolve_auto_parsers runs it on a template it was handed (the reasoning
    toggle read from the text first, then the rules with the vocabulary), and the first rule that holds, found as
    its match_rules finds it: in order, a rule that raises passed over."""
    if request.get("project") != "sglang":
        raise ValueError(f"no template detection for project {request.get('project')!r} (sglang only)")
    import dataclasses

    from sglang.srt.parser import template_detection as td

    template = request["template"]
    force, config = td.detect_reasoning_pattern(template)

    def context(vocab):
        return td.TemplateDetectionContext(template=template, reasoning_config=config, force_reasoning=force,
                                           vocab=set(vocab))

    def first(rules, ctx):
        for rule in rules:
            try:
                if rule.predicate(ctx):
                    return rule
            except Exception:  # noqa: BLE001 -- SGLang's match_rules skips a rule that raises
                continue
        return None

    ctx = context(request.get("vocab") or ())
    rule = first(td.TOOL_CALL_PARSER_RULES, ctx)
    bare = first(td.TOOL_CALL_PARSER_RULES, context(()))
    reasoning = first(td.REASONING_PARSER_RULES, ctx)
    return {"tool_call_parser": rule.value if rule else None, "rule": rule.name if rule else None,
            "text_only": bare.value if bare else None, "reasoning_parser": reasoning.value if reasoning else None,
            "reasoning": dataclasses.asdict(config) if config else None, "force_reasoning": bool(force)}


def _guarded(fn, *args) -> dict:
    try:
        return fn(*args)
    except Exception as exc:  # a parser that raises is a finding (crashed), not the end of the run
        return {"error": _error(exc)}


class _Calls:
    """Streamed tool-call deltas accumulated by index, as a client accumulates them."""

    def __init__(self):
        self.calls: dict = {}

    def add(self, index: int, name, arguments) -> None:
        call = self.calls.setdefault(index, {"name": None, "arguments": ""})
        if name:
            call["name"] = name
        if arguments:
            call["arguments"] += arguments

    def last_index(self):
        return max(self.calls) if self.calls else None

    def answer(self, content: str) -> dict:
        return {"content": content, "calls": [self.calls[i] for i in sorted(self.calls)]}


class VllmDriver:
    def __init__(self, request: dict, tok):
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.tool_parsers import ToolParserManager

        from vllm.tokenizers.hf import get_cached_tokenizer

        self.cls = ToolParserManager.get_tool_parser(request["parser"])
        # The server hands parsers its cached tokenizer (get_vocab() once, not per request): so do we.
        key = ("vllm", request["tokenizer"], tuple(request.get("added_tokens") or ()),
               tuple(sorted((request.get("tokenizer_config") or {}).items())))
        if key not in _TOKENIZERS:
            _TOKENIZERS[key] = get_cached_tokenizer(tok)
        self.tok = _TOKENIZERS[key]
        self.request = ChatCompletionRequest(model="peer", messages=[{"role": "user", "content": "."}],
                                             tools=request["tools"] or None)
        self.tools = self.request.tools

    def parser(self):
        if "tools" in inspect.signature(self.cls.__init__).parameters:
            return self.cls(self.tok, tools=self.tools)
        return self.cls(self.tok)

    def one_shot(self, reply: str) -> dict:
        parser = self.parser()
        request = parser.adjust_request(self.request.model_copy(deep=True))
        info = parser.extract_tool_calls(reply, request)
        calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in info.tool_calls or []]
        return {"content": info.content or "", "calls": calls if info.tools_called or calls else []}

    def stream(self, ids: list, texts: list, sizes: list) -> dict:
        parser = self.parser()
        request = parser.adjust_request(self.request.model_copy(deep=True))
        calls, content, at = _Calls(), "", 0
        for size in sizes:
            end = at + size
            delta = parser.extract_tool_calls_streaming(texts[at], texts[end], texts[end][len(texts[at]):],
                                                        ids[:at], ids[:end], ids[at:end], request)
            at = end
            if delta is None:
                continue
            content += delta.content or ""
            for call in delta.tool_calls or []:
                function = call.function
                calls.add(call.index, function.name if function else None, function.arguments if function else None)
        # The server's last step: arguments the parser read but had not streamed yet go out with the finish.
        last = calls.last_index()
        if last is not None and hasattr(parser, "get_remaining_unstreamed_args"):
            calls.add(last, None, parser.get_remaining_unstreamed_args())
        return calls.answer(content)


class SglangDriver:
    def __init__(self, request: dict, tok):
        from sglang.srt.entrypoints.openai.protocol import Tool
        from sglang.srt.function_call.function_call_parser import FunctionCallParser

        self.make = lambda: FunctionCallParser([Tool(**t) for t in request["tools"]], request["parser"], tokenizer=tok)

    def one_shot(self, reply: str) -> dict:
        content, items = self.make().parse_non_stream(reply)
        return {"content": content or "", "calls": [{"name": c.name, "arguments": c.parameters} for c in items]}

    def stream(self, ids: list, texts: list, sizes: list) -> dict:
        parser = self.make()
        calls, content, at = _Calls(), "", 0
        for size in sizes:
            end = at + size
            normal, items = parser.parse_stream_chunk(texts[end][len(texts[at]):])
            at = end
            content += normal or ""
            for item in items:
                calls.add(item.tool_index, item.name, item.parameters)
        normal, items = parser.parse_stream_end()
        content += normal or ""
        for item in items:
            calls.add(item.tool_index, item.name, item.parameters)
        # The server's last step (serving_chat._check_for_unstreamed_tool_args): the last call's arguments the
        # detector read but had not streamed go out at the finish.
        detector = parser.detector
        read, sent = getattr(detector, "prev_tool_call_arr", None), getattr(detector, "streamed_args_for_tool", None)
        if read and sent and len(read) - 1 < len(sent):
            expected = read[-1].get("arguments", {})
            expected = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
            if expected.startswith(sent[len(read) - 1]):
                calls.add(len(read) - 1, None, expected[len(sent[len(read) - 1]):])
        return calls.answer(content)


class TransformersDriver:
    """The tokenizer's parse_response (one-shot) and get_response_parser (streamed: feed each chunk, then
    finalize, whose message is what the stream accumulated) with the model type's response template. The prefix
    is empty: a case is fed from after any reasoning, the assistant turn already open."""

    def __init__(self, request: dict, tok):
        from transformers.cli.serving.utils import _RESPONSE_TEMPLATE_FALLBACKS

        found = [t for types, t in _RESPONSE_TEMPLATE_FALLBACKS.items() if request["parser"] in types]
        if not found:
            raise ValueError(f"transformers has no response template for model type {request['parser']!r}")
        self.template, self.tok, self.tools = found[0], tok, request["tools"] or None

    @staticmethod
    def _answer(message: dict) -> dict:
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            calls.append({"name": function.get("name"), "arguments": arguments if isinstance(arguments, str)
                          else json.dumps(arguments, ensure_ascii=False)})
        return {"content": message.get("content") or "", "calls": calls}

    def one_shot(self, reply: str) -> dict:
        return self._answer(self.tok.parse_response(reply, self.template, prefix="", tools=self.tools))

    def stream(self, ids: list, texts: list, sizes: list) -> dict:
        parser, at = self.tok.get_response_parser(self.template, prefix="", tools=self.tools), 0
        for size in sizes:
            parser.feed(texts[at + size][len(texts[at]):])
            at += size
        return self._answer(parser.finalize()[0])


DRIVERS = {"vllm": VllmDriver, "sglang": SglangDriver, "transformers": TransformersDriver}


if __name__ == "__main__":
    main()
