"""What `harness run` says at its end about the committed results: a fresh run in a folder of its own is
compared with the committed transcripts of the same models, sample by sample (same scenario, mode, seed and
sample), and a run into the committed folder that found everything recorded says so and how to run afresh.
On a fresh clone every sample of the default models is already committed: without this the main command would
print "ran 0" per model and only re-report, which reads as if the models had run."""

from __future__ import annotations

from harness.evaluation.results import ResultsDir


def _verdicts(path, scenarios) -> dict:
    from harness.evaluation.scored import sample_entry, score_transcripts
    from harness.evaluation.transcripts import read_transcript

    scored = score_transcripts([read_transcript(path)], scenarios)
    entries = (sample_entry(record, scenario, verdicts) for record, scenario, verdicts in scored.samples)
    return {(e["scenario"], e["mode"], e["seed"], e["sample"]): e["verdicts"]["all_checks"] for e in entries}


def comparison(summaries: list, results_dir: ResultsDir, scenarios) -> list:
    """Lines comparing each model's samples in `results_dir` with the committed ones; [] when there is nothing
    to compare (the run wrote into the committed folder, or no committed transcript has the model)."""
    committed = ResultsDir.at()
    if results_dir.root.resolve() == committed.root.resolve():
        return []
    by_name = {s.name: s for s in scenarios}
    lines = []
    for summary in summaries:
        theirs_path = committed.transcript(summary["model"])
        if not theirs_path.is_file():
            continue
        ours, theirs = _verdicts(summary["transcript"], by_name), _verdicts(theirs_path, by_name)
        for mode in sorted({key[1] for key in ours}):
            common = [k for k in ours if k[1] == mode and k in theirs]
            if not common:
                continue
            here, there = sum(ours[k] is True for k in common), sum(theirs[k] is True for k in common)
            differ = sum(ours[k] != theirs[k] for k in common)
            lines.append(f"  {summary['model']} {mode}: all checks {here}/{len(common)} here, {there}/{len(common)} "
                         f"in {committed.root.name}/; {differ} sample(s) judged differently")
    if lines:
        lines.insert(0, f"compared with the committed {committed.transcripts} (the same scenarios, seeds and "
                        "samples):")
    return lines


def nothing_ran_notice(summaries: list, results_dir: ResultsDir) -> list:
    """When every sample was already recorded in the committed folder: say so, and how to run afresh."""
    committed = ResultsDir.at()
    if not summaries or any(s["ran"] for s in summaries) or results_dir.root.resolve() != committed.root.resolve():
        return []
    return [f"nothing ran: every sample asked for is already recorded in {committed.transcripts} (the committed "
            "results); the tables come from those records.",
            "to run the models afresh and compare with them: harness run --results-dir runs/mine"]
