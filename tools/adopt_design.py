"""Adopt a design study's samples into the main results folder once its design is the default.

A study folder (results/designs/VARIANT/) holds samples written exactly as a run of the main folder writes them
under that design (the same prompt, grammar, seeds and greedy sampling; the setup digest says so). When VARIANT
becomes the default design, the main folder's samples of the older design are superseded: rather than asking
the study's cases again, their records are appended to the main folder's transcripts (model records first, under
each transcript's writer lock) and the superseded records dropped, as `harness run` does after a re-run. Samples
of another design, or whose setup is not today's, are refused, never copied.

A study can also take over another study's samples where the two designs send a model the same prompt and the same
grammar (only the design's name differs: envelope-or-text-told and -told-once on a template without a tool
format, which is told the tools either way). Those replies are what the new design would sample, so they are
copied into its folder under its name, each marked with the design and setup it was written under; a sample whose
prompt or grammar would differ is left for a run to ask.

    python tools/adopt_design.py VARIANT [--keep OLD] [--results-dir results]
    python tools/adopt_design.py VARIANT --carry-from OTHER [--results-dir results]
"""

import argparse
import dataclasses
import sys
from pathlib import Path

from harness.evaluation.setups import CurrentSetups
from harness.grammar.plan import DEFAULT_VARIANT, check_variant, folder_variant, grammar_plan, recorded_variant
from harness.storage.records import ModelRecord, SampleRecord
from harness.storage.results import ResultsDir
from harness.storage.transcripts import read_transcript
from harness.storage.transcript_writer import TranscriptWriter


def adopt(main: ResultsDir, variant: str, scenario_of) -> dict:
    """{target path: (adopted, dropped)}. scenario_of(record) -> the record's current scenario, or None."""
    study = ResultsDir(main.designs / variant)
    out = {}
    for kind in ("bfcl", "transcripts"):
        for path in sorted((study.root / kind).glob("*.jsonl")):
            read = read_transcript(path)
            setups = CurrentSetups(variant)
            models, samples = [], []
            for record in read.records:
                if isinstance(record, ModelRecord):
                    setups.add(record)
                    models.append(record)
                elif isinstance(record, SampleRecord) and record.mode != "native":
                    scenario = scenario_of(record)
                    if (scenario is None or scenario.hash != record.scenario.hash
                            or recorded_variant(record.grammar) != variant or setups.outdated(record, scenario)):
                        raise SystemExit(f"{read.where(record)}: not a current {variant} sample; re-run the study "
                                         "before adopting it")
                    samples.append(record)
            if not samples:
                continue
            target = main.root / kind / path.name
            done = _append_new(target, main.root, models, samples, lambda writer: writer.drop_superseded())
            if done is not None:
                out[target] = done
    return out


def _append_new(target: Path, root: Path, models: list, samples: list, then=lambda writer: None):
    """Append to `target`, under its writer lock, the `samples` it does not hold yet under the same setup (a
    second adoption or copy adds nothing), the model records first; then `then(writer)` inside the lock.
    (how many samples were appended, what `then` returned), or None when none was new."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with TranscriptWriter(target, root) as writer:
        held = read_transcript(target).records if target.is_file() else []
        there = {(r.key(), r.setup()) for r in held if isinstance(r, SampleRecord)}
        new = [r for r in samples if (r.key(), r.setup()) not in there]
        if not new:
            return None
        for record in models + new:
            writer.append(record)
        return len(new), then(writer)


def carry(main: ResultsDir, source: str, variant: str, scenario_of) -> dict:
    """Copy into designs/VARIANT/ the current samples of designs/SOURCE/ whose plan under VARIANT is the plan
    under SOURCE but for the design's name (so the same prompt, grammar, retry and preambles), each as VARIANT
    records it, with `carried` naming SOURCE and its setup. {target path: (carried, left to be run)}."""
    study, target_study = ResultsDir(main.designs / source), ResultsDir(main.designs / variant)
    out = {}
    for kind in ("bfcl", "transcripts"):
        for path in sorted((study.root / kind).glob("*.jsonl")):
            read = read_transcript(path)
            setups = CurrentSetups(source)
            by_model, models, samples, left = {}, [], [], 0
            for record in read.records:
                if isinstance(record, ModelRecord):
                    setups.add(record)
                    models.append(record)
                    by_model[(record.model.id, record.model.sha256)] = record
                    continue
                if not isinstance(record, SampleRecord) or record.mode == "native":
                    continue
                model = by_model.get((record.model.id, record.model.sha256))
                scenario = scenario_of(record)
                same = (model is not None and scenario is not None and scenario.hash == record.scenario.hash
                        and recorded_variant(record.grammar) == source and "gbnf_sha256" in (record.grammar or {})
                        and not setups.outdated(record, scenario))
                plan = _same_plan(model, record, scenario, source, variant) if same else None
                if plan is None:
                    left += 1
                    continue
                samples.append(dataclasses.replace(record, grammar=plan.to_json(record.mode),
                                                   carried={"from": source, "setup": record.setup()}))
            if samples:
                done = _append_new(target_study.root / kind / path.name, target_study.root, models, samples)
                out[target_study.root / kind / path.name] = (done[0] if done else 0, left)
    return out


def _same_plan(model: ModelRecord, record: SampleRecord, scenario, source: str, variant: str):
    """VARIANT's plan for the sample when it is SOURCE's in everything but the design's name, else None."""
    template = (model.template or {}).get("text")
    example = (model.detection or {}).get("rendered_call")
    try:
        old = grammar_plan(record.family, scenario, template, source, example)
        new = grammar_plan(record.family, scenario, template, variant, example)
    except Exception:  # noqa: BLE001 -- a plan that cannot be built today is not the same plan
        return None
    if old is None or new is None or dataclasses.replace(old, variant=variant) != new:
        return None
    return new


def keep(main: ResultsDir, old: str) -> dict:
    """Copy the main folder's grammar and fallback samples of the `old` design (the default before) into its own
    study folder (results/designs/OLD/), model records first, before the new default's supersede them: the designs
    page goes on setting the old design beside the others, and the replies a person judged
    (tests/evaluation/hand_judged.yaml) stay committed where the judgement can find them. {target path: copied}."""
    study = ResultsDir(main.designs / old)
    out = {}
    for kind in ("bfcl", "transcripts"):
        for path in sorted((main.root / kind).glob("*.jsonl")):
            read = read_transcript(path)
            models = [r for r in read.records if isinstance(r, ModelRecord)]
            samples = [r for r in read.records if isinstance(r, SampleRecord) and r.mode in ("grammar", "fallback")
                       and recorded_variant(r.grammar) == old]
            done = _append_new(study.root / kind / path.name, study.root, models, samples)
            if done is not None:
                out[study.root / kind / path.name] = done[0]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant")
    parser.add_argument("--results-dir", type=Path, default=None)
    parser.add_argument("--keep", metavar="OLD",
                        help="first copy the main folder's grammar and fallback samples of OLD (the default before) "
                             "into designs/OLD/, so the designs page keeps it beside the others")
    parser.add_argument("--carry-from", metavar="OTHER",
                        help="copy into designs/VARIANT/ the samples of designs/OTHER/ written under the same prompt "
                             "and grammar as VARIANT's (only the design's name differs); nothing is adopted")
    args = parser.parse_args()
    results = ResultsDir.at(args.results_dir)
    check_variant(args.variant)
    adopting = args.carry_from is None
    if adopting and (args.variant != DEFAULT_VARIANT or folder_variant(results.root) != DEFAULT_VARIANT):
        print(f"adopt_design: {results.root} holds the default design ({DEFAULT_VARIANT}); only its samples can be "
              f"adopted there, not {args.variant}'s", file=sys.stderr)
        return 2
    from harness.evaluation.scenario_files import load_scenarios
    from harness.suites.bfcl.cases import category_of, load_suite

    scenarios = {s.name: s for s in load_scenarios()}
    suite = load_suite()

    def scenario_of(record):
        name = record.scenario.name
        if name.startswith("bfcl-") and category_of(name[len("bfcl-"):]):
            case = suite.by_name(name)
            return case.scenario if case is not None else None
        return scenarios.get(name)

    if args.carry_from:
        for target, (carried, left) in carry(results, check_variant(args.carry_from), args.variant,
                                             scenario_of).items():
            print(f"{target}: {carried} sample(s) carried from {args.carry_from}, {left} left to be run "
                  "(another prompt or grammar under this design)")
        return 0
    if args.keep:
        for target, copied in keep(results, check_variant(args.keep)).items():
            print(f"{target}: {copied} {args.keep} sample(s) kept")
    for target, (adopted, dropped) in adopt(results, args.variant, scenario_of).items():
        print(f"{target}: {adopted} sample(s) adopted, {dropped} superseded record(s) dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
