"""What `harness run` says at its end about the committed results: a fresh run in a folder of its own is
compared with the committed transcripts of the same models, sample by sample (same scenario, mode, seed and
sample), and a run into the committed folder that found everything recorded says so and how to run afresh.
On a fresh clone every sample of the default models is already committed: without this the main command would
print "ran 0" per model and only re-report, which reads as if the models had run."""

from __future__ import annotations

from harness.storage.results import ResultsDir


def _verdicts(path, scenarios) -> dict:
    """(scenario, mode, seed, sample) -> (all-checks verdict, the replies as written, the batch size, the engine)."""
    from harness.evaluation.scored import sample_entry, score_transcripts
    from harness.storage.transcripts import read_transcript

    scored = score_transcripts([read_transcript(path)], scenarios)
    out = {}
    for record, scenario, verdicts in scored.samples:
        e = sample_entry(record, scenario, verdicts)
        replies = tuple(s.get("reply") for t in record.turns for s in t.get("steps", []))
        out[(e["scenario"], e["mode"], e["seed"], e["sample"])] = (
            e["verdicts"]["all_checks"], replies, (record.batch or {}).get("size", 1), record.engine)
    return out


def comparison(summaries: list, results_dir: ResultsDir, scenarios) -> list:
    """Lines comparing each model's samples in `results_dir` with the committed ones, on the verdicts and on
    the replies themselves (one seed gives other replies where the batch its first step was written in, the
    binding or the threads differ: said, with how many of each); [] when there is nothing to compare (the run
    wrote into the committed folder, or no committed transcript has the model)."""
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
            here, there = sum(ours[k][0] is True for k in common), sum(theirs[k][0] is True for k in common)
            differ = sum(ours[k][0] != theirs[k][0] for k in common)
            written = [k for k in common if ours[k][1] != theirs[k][1]]
            line = (f"  {summary['model']} {mode}: all checks {here}/{len(common)} here, {there}/{len(common)} "
                    f"in {committed.root.name}/; {differ} sample(s) judged differently; {len(written)} wrote "
                    "other replies")
            if written:
                batch = sum(ours[k][2] != theirs[k][2] for k in written)
                engine = sum(ours[k][3] != theirs[k][3] for k in written)
                line += (f" ({batch} of them written in a batch of another size, {engine} by another binding or "
                         "thread count, as recorded: the same seed need not give the same reply then)")
            lines.append(line)
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
