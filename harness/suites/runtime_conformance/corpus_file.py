"""The runtime-conformance cases a user writes (`harness scripted-model --cases FILE`): a YAML list of
conversations and replies, each read into the corpus's Case with the strict parse of its reply, as build_corpus
makes the template's own (corpus.py)."""

from __future__ import annotations

from harness import families
from harness.core.errors import TemplateError
from harness.suites.runtime_conformance.corpus import AUTO, VARIANTS, Case, Corpus, Renderer
from harness.template import detect as detection
from harness.template.kwargs import template_kwargs_for


_CASE_TYPES = {"tools": (list, "a list of tools"), "variants": (list, "a list of variant names"),
               "template_kwargs": (dict, "a mapping of template variables")}


def _check_case_fields(located, i: int, raw: dict) -> None:
    """Wrong-typed optional fields, named with case and field (text no model can write, a lone surrogate, is
    refused where the YAML is read, with its file and line)."""
    from harness.core.errors import HarnessError

    name = raw["name"]
    for key, (kind, what) in _CASE_TYPES.items():
        if raw.get(key) is not None and not isinstance(raw[key], kind):
            raise HarnessError(f"{located.where(i, key)}: case {name!r}: {key} must be {what}, not "
                               f"{type(raw[key]).__name__}")


def cases_from_file(path, ref, found=None) -> Corpus:
    """Cases a user writes: a YAML list of {name, messages, tools, reply, variants?, template_kwargs?}. The
    strict parse of each reply is computed here; errors name file, line and field."""
    from harness.core.errors import HarnessError
    from harness.core.yaml_source import load_located

    located = load_located(path, HarnessError)
    found = found or detection.detect(ref.text, ref.bos_token or "", ref.eos_token or "",
                                      **template_kwargs_for(ref.text))
    r = Renderer(ref, found)
    if not isinstance(located.data, list) or not located.data:
        raise HarnessError(f"{located.where()}: a list of cases")
    cases, names = [], set()
    for i, raw in enumerate(located.data):
        if not isinstance(raw, dict):
            raise HarnessError(f"{located.where(i)}: a mapping with name, messages, tools and reply")
        missing = [k for k in ("name", "messages", "reply") if k not in raw]
        unknown = sorted(set(raw) - {"name", "messages", "tools", "reply", "variants", "template_kwargs"})
        if missing or unknown:
            raise HarnessError(f"{located.where(i)}: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(unknown)}"] if unknown else [])))
        if not isinstance(raw["name"], str) or raw["name"] in names or not isinstance(raw["reply"], str) \
                or not isinstance(raw["messages"], list):
            raise HarnessError(f"{located.where(i, 'name')}: names are unique text, reply is text, messages a list")
        _check_case_fields(located, i, raw)
        variants = tuple(raw.get("variants") or (AUTO,))
        bad = [v for v in variants if v not in VARIANTS]
        if bad:
            raise HarnessError(f"{located.where(i, 'variants')}: unknown {', '.join(map(str, bad))}; known: "
                               f"{', '.join(VARIANTS)}")
        names.add(raw["name"])
        kwargs = raw.get("template_kwargs") or r.kwargs
        tools = raw.get("tools") or []
        try:
            prompt = r.prompt(raw["messages"], tools or None, kwargs)
        except TemplateError as exc:
            raise HarnessError(f"{located.where(i, 'messages')}: the template refuses the conversation: {exc}") from None
        expect = families.parse(found.family, raw["reply"], prompt).to_json()
        cases.append(Case(raw["name"], raw["messages"], tools, raw["reply"], variants, dict(kwargs), expect,
                          prompt=prompt))
    return Corpus(ref.id, found.family, cases, [], found)
