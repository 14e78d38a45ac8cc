"""Which requests of each template's current corpus a runtime's records lack, and which records ask a case the
corpus no longer holds. A runtime's counts on the page are over what it was asked: a template asked in part (a run
stopped early, a case added to the corpus after the run) would otherwise read as covered. Only templates a runtime
has records of are held against the corpus; which templates each runtime is given at all is the runtime table's
and the HF selection's business (harness.suites.runtime_conformance.hf_serving)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from harness.backends import runtimes
from harness.core.errors import HarnessError
from harness.core.hashing import sha256_text
from harness.pins.sources import load_sources, resolve_template
from harness.suites.runtime_conformance.corpus import build_corpus
from harness.suites.runtime_conformance.driver import case_hash, requests_for
from harness.suites.runtime_conformance.endpoint import entry_hash


@dataclass(frozen=True)
class Gap:
    runtime: str
    server: str
    template: str
    missing: tuple        # (case, variant) of the current corpus with no record
    other: int            # records of a case or reply the current corpus does not hold (an older one, a file's)
    why: str | None = None    # the template's corpus could not be built: why


def request_keys(ref) -> dict:
    """(template sha256, case, hash, variant) -> (case, variant) for every request of the template's current corpus.
    A record carries one of two hashes: the driver's (case_hash: the case's messages, tools, reply and switches)
    or, asked from a manifest (--endpoint, the scripts that serve HF folders), the manifest entry's (entry_hash:
    the request body and the reply). Both name the same request, so either counts."""
    sha = sha256_text(ref.text)
    keys = {}
    for q in requests_for(build_corpus(ref)):
        for h in (case_hash(q.case), entry_hash({"request": q.body, "reply": q.case.reply})):
            keys[(sha, q.case.name, h, q.variant)] = (q.case.name, q.variant)
    return keys


def gaps(records: list, sources=None) -> list:
    """A Gap for each runtime × template whose records lack a request of the current corpus or hold one it no
    longer has, sorted by runtime and template."""
    done: dict = {}
    servers: dict = {}
    for r in records:
        done.setdefault(r.template["id"], {}).setdefault(r.runtime, set()).add(r.done_key())
        servers[r.runtime] = r.server
    sources = sources or load_sources()
    out = []
    for template in sorted(done):
        try:
            keys = request_keys(resolve_template(template, sources))
        except HarnessError as exc:
            out += [Gap(runtime, servers[runtime], template, (), len(asked), str(exc))
                    for runtime, asked in sorted(done[template].items())]
            continue
        wanted = set(keys.values())
        for runtime, asked in sorted(done[template].items()):
            missing = wanted - {keys[k] for k in asked if k in keys}
            other = sum(1 for k in asked if k not in keys)
            if missing or other:
                out.append(Gap(runtime, servers[runtime], template, tuple(sorted(missing)), other))
    return sorted(out, key=lambda g: (g.runtime, g.template))


def resume_command(runtime_name: str, server: str, template: str) -> str | None:
    """The line that asks what a template's records on a runtime lack (a run resumes: only what is not recorded is
    asked), from the repository root: the harness's own for a runtime it starts, the script's for one a script of
    the repository serves (its records say `endpoint`, the script asking through it); None for a runtime the user
    serves (--endpoint: their server, their URL)."""
    runtime = runtimes.of_records(server, runtime_name)
    if runtime is None:
        return None
    command = runtime.served_by or f".venv/bin/harness runtime-conformance --server {runtime.name}"
    return f"{command} --template {shlex.quote(template)}"


def gap_lines(found: list) -> list:
    """The page's section on them; a sentence saying none where every record set is whole."""
    lines = ["", "## Requests not asked", ""]
    if not found:
        return lines + ["Every runtime's records hold every request of the current corpus for each template it was "
                        "asked about, and none of a case the corpus no longer holds."]
    lines += ["Templates a runtime was asked about in part: the requests of the template's current corpus "
              "(harness/suites/runtime_conformance/corpus.py) with no record, and the records of a case or reply the "
              "corpus no longer holds (asked of an older corpus, or of a corpus file). The runtime's counts above "
              "are over what it was asked; the command asks the rest.", ""]
    for g in found:
        if g.why:
            lines.append(f"- {g.runtime}, {g.template}: {g.other} record(s) of a template whose corpus is not built "
                         f"now: {g.why}")
            continue
        cases: dict = {}
        for case, variant in g.missing:
            cases.setdefault(case, []).append(variant)
        said = [f"{len(g.missing)} of the current corpus not asked ("
                + ", ".join(f"{c} {'/'.join(v)}" for c, v in cases.items()) + ")"] if g.missing else []
        said += [f"{g.other} record(s) of a case it no longer holds"] if g.other else []
        command = resume_command(g.runtime, g.server, g.template) if g.missing else None
        lines.append(f"- {g.runtime}, {g.template}: {'; '.join(said)}"
                     + (f": `{command}`" if command else " (served with --endpoint: the same command against it)"
                        if g.missing else ""))
    return lines
