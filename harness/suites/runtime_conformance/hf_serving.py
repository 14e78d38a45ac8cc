"""Which templates the runtimes that serve an HF folder are given (scripts/hf_runtime_conformance.py). One
selection for both, so their records cover the same templates and cases:

- a family (a template without one has no corpus);
- a vLLM tool parser for it (the family's `peers:`): the templates vLLM can be asked about at all;
- a byte-level vocabulary (harness.scripted.hf_form writes no SentencePiece tokenizer: the Mistral profile);
- identical template texts once, under the id the HF runtimes' records already carry, else the first pinned.

transformers serve is given every one of them, also where transformers has no response template for the family
(its module's call_reader is None): it then reads no call and an app gets the call as text, which its records
show (call-left-in-content), rather than leaving the family out."""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends import runtimes
from harness.core.hashing import sha256_text
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.pins.sources import resolve_template
from harness.scripted.hf_form import has_hf_form
from harness.scripted.plan import profile_for

# The runtimes given these templates (each module's reader_project says what reads its calls).
SERVED = ("vllm-cpu", "transformers-serve")


@dataclass(frozen=True)
class Selected:
    template: str
    family: str
    sha256: str


def how_served(server: str, family: str | None, template: str) -> tuple:
    """(what `server` reads the template's calls with, None for nothing; why it is not served, None when it is):
    vLLM needs its tool parser to start; transformers serve is served without a response template where the
    family has none (its module's no_reader says what that means)."""
    runtime = runtimes.get(server)
    reader = runtime.call_reader(family, template)
    if reader or runtime.no_reader:
        return reader, None
    return None, f"no {runtime.reader_project} parser for family {family!r}"


def hf_form_templates(sources, prefer=()) -> tuple[list, list]:
    """(the templates both HF runtimes are given, as Selected in pinned order; (id, why) for every other pinned
    template). prefer: template ids already recorded, kept over an identical text pinned before them."""
    kept: dict = {}           # sha256 -> Selected
    skipped = []
    vllm = runtimes.get("vllm-cpu")
    for template_id in sources.templates:
        ref = resolve_template(template_id, sources)
        family = build_corpus(ref).family
        profile = profile_for(ref.text)
        why = ("no family" if not family else
               f"no vLLM tool parser for family {family}" if not vllm.call_reader(family, template_id) else
               f"no HF form for its {profile} vocabulary (SentencePiece)" if not has_hf_form(profile) else None)
        if why:
            skipped.append((template_id, why))
            continue
        sha = sha256_text(ref.text)
        other = kept.get(sha)
        if other is not None and (template_id not in prefer or other.template in prefer):
            skipped.append((template_id, f"the same template as {other.template}"))
            continue
        if other is not None:
            skipped.append((other.template, f"the same template as {template_id}"))
        kept[sha] = Selected(template_id, family, sha)
    order = list(sources.templates)
    return sorted(kept.values(), key=lambda s: order.index(s.template)), skipped
