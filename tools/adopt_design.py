"""Adopt a design study's samples into the main results folder once its design is the default.

A study folder (results/designs/VARIANT/) holds samples written exactly as a run of the main folder writes them
under that design (the same prompt, grammar, seeds and greedy sampling; the setup digest says so). When VARIANT
becomes the default design, the main folder's samples of the older design are superseded: rather than asking
the study's cases again, their records are appended to the main folder's transcripts (model records first, under
each transcript's writer lock) and the superseded records dropped, as `harness run` does after a re-run. Samples
of another design, or whose setup is not today's, are refused, never copied.

    python tools/adopt_design.py VARIANT [--keep OLD] [--results-dir results]
"""

import argparse
import sys
from pathlib import Path

from harness.evaluation.setups import CurrentSetups
from harness.grammar.plan import DEFAULT_VARIANT, check_variant, folder_variant, recorded_variant
from harness.storage.records import ModelRecord, SampleRecord
from harness.storage.results import ResultsDir
from harness.storage.transcripts import TranscriptWriter, read_transcript


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


def keep(main: ResultsDir, old: str) -> dict:
    """Copy the main folder's grammar-mode samples of the `old` design (the default before) into its own study
    folder (results/designs/OLD/), model records first, before a run under the new default drops them: the
    designs page goes on setting the old design beside the others. {target path: copied}."""
    study = ResultsDir(main.designs / old)
    out = {}
    for kind in ("bfcl", "transcripts"):
        for path in sorted((main.root / kind).glob("*.jsonl")):
            read = read_transcript(path)
            models = [r for r in read.records if isinstance(r, ModelRecord)]
            samples = [r for r in read.records if isinstance(r, SampleRecord) and r.mode == "grammar"
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
                        help="first copy the main folder's grammar samples of OLD (the default before) into "
                             "designs/OLD/, so the designs page keeps it beside the others")
    args = parser.parse_args()
    results = ResultsDir.at(args.results_dir)
    if args.variant != DEFAULT_VARIANT or folder_variant(results.root) != DEFAULT_VARIANT:
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

    if args.keep:
        for target, copied in keep(results, check_variant(args.keep)).items():
            print(f"{target}: {copied} {args.keep} sample(s) kept")
    for target, (adopted, dropped) in adopt(results, args.variant, scenario_of).items():
        print(f"{target}: {adopted} sample(s) adopted, {dropped} superseded record(s) dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
