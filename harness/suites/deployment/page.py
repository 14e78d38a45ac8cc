"""results/deployment.md: where does a model's tool calling work? One table first: model × setup → BFCL accuracy
where a call is due and where none is, calls left in content, errors, each k/n with its Wilson 95% interval,
ranked only within a model over the same cases. Then the sentences, the runtime's labels, the per-category
detail and examples with the line that asks each again.

Rebuilt by `harness report` from DIR/deployment/*.jsonl (harness deployment) and, for the in-process rows, the
committed BFCL records of the same models on the same cases (DIR/bfcl/*.jsonl, harness run --suite bfcl), both
judged by BFCL's own checker in its environment (harness.peers.bfcl). Nothing is written without deployment
records, so a folder without them regenerates as before."""

from __future__ import annotations

from collections import Counter
from html import escape

from harness.backends import runtimes
from harness.core.errors import BFCLCheckerError, UnsafeWriteError
from harness.core.safe_writes import check_target
from harness.suites.bfcl.cases import ARCHIVE_ID, CATEGORIES, load_suite
from harness.storage.counted_once import CountedOnce, distinct_files
from harness.evaluation.judging import cell, label_head
from harness.storage.results import file_stem
from harness.storage.transcripts import read_transcript
from harness.peers.bfcl import SETUP_COMMAND, BFCLChecker
from harness.pins.archives import archive_tree
from harness.pins.sources import load_sources
from harness.suites.bfcl.judging import judge as judge_in_process
from harness.suites.bfcl.judging import read_outcomes, valid_verdict
from harness.reports.rates import rate_cell
from harness.reports.tables import mode_order
from harness.suites.deployment.glance import glance_html, glance_markdown, glance_rows
from harness.suites.deployment.judging import LABELS, answer_view, median_answered_seconds
from harness.evaluation.scenario_files import load_scenarios
from harness.suites.deployment.openings import is_opening, replay_rows as opening_rows
from harness.suites.deployment.openings import section as openings_section
from harness.suites.deployment.records import DeploymentRecord, dequantized_from, served_setup
from harness.suites.deployment.replay_gaps import gap_lines
from harness.suites.deployment.replays import current_records, read_replays, replay_answers, scenario_first_replies
from harness.suites.deployment.sentences import sentences
from harness.suites.deployment.rows import (NOT_JUDGED, Row, place, rank_rows, replay_label_lines, replay_rows,
                                            replay_section)

PAGE = "deployment.md"
FOLDER = "deployment"
IN_PROCESS = "in-process"
COLUMNS = ("model", "setup", "rank", "ranked on", "BFCL, calls due", "BFCL, no call due", "calls left in content",
           "errors")


def read_records(results, warnings: list) -> list:
    """Every deployment record under the folder, each file and each question once (a copy counts nothing twice)."""
    once = CountedOnce()
    for path in distinct_files(sorted((results.root / FOLDER).glob("*.jsonl")), warnings):
        found = read_transcript(path, kinds=(DeploymentRecord,))
        warnings += found.warnings
        once.add_file(path, [(r.key(), f"{file_stem(r.model['id'])}.jsonl", r) for r in found.records])
    warnings += once.warnings()
    # In one order whatever order they landed in (requests in flight land as they finish): the page is the same.
    return sorted(once.values(), key=lambda r: (r.model["id"], r.runtime, r.case["category"], r.case["id"],
                                                r.tool_choice))


def _in_process_rows(outcomes: list, models: dict, suite, checker) -> list:
    """The committed BFCL records (results/bfcl, read as outcomes) of each model, in its modes, on the cases its
    deployment records hold: our in-process render and strict parser, what an app gets from the embedded backend."""
    outcomes = [o for o in outcomes if o.case in models.get(o.model, ())]
    verdicts = judge_in_process(outcomes, checker, suite) if checker is not None else {}
    rows = {}
    for o in outcomes:
        row = rows.setdefault((o.model, o.mode), Row(o.model, f"{IN_PROCESS}, {o.mode}", (0, mode_order(o.mode))))
        verdict = verdicts.get((o.case, o.model, o.mode), (None,))[0]
        row.answers.append((o.case, o.category, o.errored, o.attempted and not o.strict and not o.errored, verdict))
    return list(rows.values())


def _served_rows(records: list, suite, checker, verdicts: dict | None = None) -> list:
    """verdicts: filled with (model, runtime, case id) -> the non-streamed auto answer's verdict."""
    rows = {}
    for r in records:
        case = suite.cases[r.case["id"]]
        tools = case.scenario.tool_schemas()
        for streamed, answer in ((False, r.plain), (True, r.stream)):
            setup = served_setup(r, streamed)
            row = rows.setdefault((r.model["id"], setup),
                                  Row(r.model["id"], setup, (1, r.runtime, r.tool_choice != "auto", streamed)))
            view = answer_view(r, answer, tools)
            verdict = None
            if checker is not None:
                verdict = ({"valid": False, "error_type": "runtime-error"} if view["errored"] else
                           checker.judge(case.category, case.functions, view["calls"], case.answer))
            row.answers.append((case.id, case.category, view["errored"], view["left_in_content"], verdict))
            if verdicts is not None and not streamed and r.tool_choice == "auto":
                verdicts[(r.model["id"], r.runtime, case.id)] = verdict
    return list(rows.values())


def _replays(results, outcomes: list, models: dict, suite, checker, warnings: list, records: list) -> tuple:
    """(replay answers, their rows): the models' committed replies replayed through runtimes (replays.py)."""
    judge = (lambda case, calls: checker.judge(case.category, case.functions, calls, case.answer)) if checker \
        else None
    answers = replay_answers(results, outcomes, models, suite, judge, warnings, records)
    return answers, replay_rows(answers)


def _cells(r: Row, rank, judged: bool) -> list:
    """One row of the table, a cell per COLUMNS, as the page and report.html's first screen both show it."""
    return [r.model, r.setup, str(rank.place) if rank else "–", rank.cell if rank else "–", r.cell("due", judged),
            r.cell("no-call", judged), r.cell("content", judged), r.cell("errors", judged)]


def _in_order(rows: list, ranks: dict) -> list:
    """Per model, the ranked rows best first, then the others."""
    return sorted(rows, key=lambda r: (r.model, place(ranks[id(r)]), r.order))


def _table(rows: list, ranks: dict, judged: bool) -> list:
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---:" if c == "rank" else "---" for c in COLUMNS) + "|"]
    for r in _in_order(rows, ranks):
        lines.append("| " + " | ".join(_cells(r, ranks[id(r)], judged)) + " |")
    return lines


def _category_lines(rows: list, judged: bool) -> list:
    present = [c for c in CATEGORIES if any(a[1] == c for r in rows for a in r.answers)]
    lines = ["| model | setup | " + " | ".join(present) + " |", "|---|---|" + "---|" * len(present)]
    for r in sorted(rows, key=lambda r: (r.model, r.order)):
        cells = []
        for category in present:
            picked = [a for a in r.answers if a[1] == category]
            cells.append("–" if not picked else rate_cell([valid_verdict(a[4]) for a in picked]) if judged
                         else NOT_JUDGED)
        lines.append(f"| {r.model} | {r.setup} | " + " | ".join(cells) + " |")
    return lines


def _label_lines(records: list) -> list:
    lines = ["| model | runtime | records | " + " | ".join(LABELS) + " |",
             "|---|---|---:|" + "---:|" * len(LABELS)]
    for model, runtime in sorted({(r.model["id"], r.runtime) for r in records}):
        mine = [r for r in records if r.model["id"] == model and r.runtime == runtime]
        counts = Counter(h for r in mine for h in {label_head(x) for x in r.labels})
        lines.append(f"| {model} | {runtime} | {len(mine)} | " + " | ".join(str(counts[k]) for k in LABELS) + " |")
    lines += ["", *(f"- `{k}`: {v}" for k, v in LABELS.items())]
    return lines


def replay_command(record: DeploymentRecord) -> str:
    if dequantized_from(record):
        return (f".venv/bin/python scripts/deployment_hf.py --server {record.server} --model {record.model['id']} "
                f'--case {record.case["id"]} --results-dir "$(mktemp -d)"')
    where = (f"--endpoint {record.endpoint} --name {record.runtime}" if record.server == "endpoint"
             else f"--server {record.server}")
    return (f"harness deployment --model {record.model['id']} {where} --case {record.case['id']} "
            '--results-dir "$(mktemp -d)"')


def _examples(records: list, per_label: int = 2) -> list:
    lines, seen = [], Counter()
    for r in sorted(records, key=lambda r: (r.model["id"], r.runtime, r.case["id"], r.tool_choice)):
        heads = [h for h in dict.fromkeys(label_head(x) for x in r.labels) if h != "agree"]
        fresh = [h for h in heads if seen[(r.model["id"], r.runtime, h)] < per_label]
        if not fresh:
            continue
        for h in heads:
            seen[(r.model["id"], r.runtime, h)] += 1
        generated = (r.plain or {}).get("generated")
        lines.append(f"- {r.model['id']} / {r.runtime} / {r.case['id']} / {r.tool_choice}: `{'`, `'.join(r.labels)}`"
                     f" — {'; '.join(r.details)[:400]}")
        lines.append(f"  generated {cell(generated) if isinstance(generated, str) else '(not shown)'}; "
                     f"replay: `{replay_command(r)}`")
    return lines


def page_markdown(results, records: list, warnings: list) -> str:
    return _pages(results, records, warnings)[0]


def _pages(results, records: list, warnings: list) -> tuple:
    """(deployment.md, the HTML section that opens report.html): one judging for both."""
    opened = [r for r in records if is_opening(r)]
    records = [r for r in records if not is_opening(r)]
    categories = [c for c in CATEGORIES if any(r.case["category"] == c for r in records)]
    suite = load_suite(categories)
    kept = [r for r in records if r.case["id"] in suite.cases and suite.cases[r.case["id"]].scenario.hash ==
            r.case["hash"]]
    if len(kept) != len(records):
        warnings.append(f"deployment: {len(records) - len(kept)} record(s) of cases this pin does not hold as "
                        "recorded, left out (run harness deployment again)")
    models = {}
    for r in kept:
        models.setdefault(r.model["id"], set()).add(r.case["id"])
    note, hello, served_verdicts = None, None, {}
    # The committed BFCL records, read once: the in-process rows and the replays' current replies both come from them.
    outcomes, _, model_records = read_outcomes(results, warnings)
    replay_records = read_replays(results, warnings)
    # The committed scenario samples' first replies: what the openings' replays are judged and counted against.
    current = scenario_first_replies(results, {s.name: s for s in load_scenarios()}, warnings) \
        if replay_records else {}
    try:
        with BFCLChecker(tree=archive_tree(ARCHIVE_ID)) as checker:
            hello = checker.hello
            rows = (_in_process_rows(outcomes, models, suite, checker)
                    + _served_rows(kept, suite, checker, served_verdicts))
            replayed, replay_table = _replays(results, outcomes, models, suite, checker, warnings, replay_records)
    except BFCLCheckerError as exc:
        note = (f"BFCL's checker was not run ({exc}); its columns say \"not judged\" until its environment is "
                f"built: `{SETUP_COMMAND}`, then `harness report` again.")
        warnings.append(note)
        rows = _in_process_rows(outcomes, models, suite, None) + _served_rows(kept, suite, None)
        replayed, replay_table = _replays(results, outcomes, models, suite, None, warnings, replay_records)
    rows += replay_table
    judged = hello is not None
    ranks = rank_rows(rows, judged)
    # Each case once, however many runtimes asked it.
    drawn = {m: Counter(c for _, c in {(r.case["id"], r.case["category"]) for r in kept if r.model["id"] == m})
             for m in models}
    shapes = {tuple(sorted(c.items(), key=lambda kv: CATEGORIES.index(kv[0]))) for c in drawn.values()}
    asked = (", ".join(f"{c} ×{n}" for c, n in next(iter(shapes))) + " per model" if len(shapes) == 1 else
             "per model as the per-category table counts them")
    glance = glance_rows(rows, ranks, judged)
    lines = ["# Deployment: the same model in process and on a runtime, judged by BFCL", "",
             *glance_markdown(glance), *_table(rows, ranks, judged), "",
             f"Each row: one model, one setup, the same BFCL v4 cases ({asked}); k/n, percent, Wilson 95% interval. *BFCL, calls due*: BFCL's own checker on the calls an "
             "app receives (in process: the strict parser's calls; on a runtime: `tool_calls`), over the cases "
             "where a call is due; *no call due*: the irrelevance cases, BFCL's rule (no decodable call is a right "
             "abstention). *Calls left in content*: no call came back and the text holds a call attempt; *errors*: "
             "no answer. *Rank*: within a model only, on BFCL's calls-due accuracy over the same call-due cases, "
             "*ranked on* (k/n there; ties share a place): of the case sets the model's rows were asked, the one "
             "that ranks the most answers (rows asked all of it × its cases); a row asked more is ranked on that "
             "set alone, a row asked fewer (a run not finished) is not ranked until it is. Replays are not "
             "ranked. `required` rows are asked only the call-due cases. In-process rows are the committed "
             "`harness run --suite bfcl` records on these cases (docs/bfcl.md); runtime rows are `harness "
             "deployment` (harness/suites/deployment/README.md).", ""]
    if hello is not None:
        lines += [f"Judged by BFCL's own checker: bfcl-eval {hello['bfcl_eval']}, `ast_checker.py` sha256 "
                  f"`{hello['files']['eval_checker/ast_eval/ast_checker.py'][:16]}…`, the pinned wheel's bytes.", ""]
    if note:
        lines += [note, ""]
    lines += ["## Not served, or not finished", "", "Each runtime the harness can start or that a script serves, "
              "for each model here, that has no row, and why; then each that was asked fewer cases than the "
              "model's widest runtime (a run stopped early: the same command goes on where it stopped); then each "
              "whose records were partly asked otherwise than a record made now: without a fresh prompt state, "
              "or before it showed the text the model generated.", "",
              *_not_served(kept), ""]
    unread = _unread_templates(kept, model_records)
    lines += ["## What the rows say", "", "The seconds below are as each answer was recorded, often with other "
              "runs sharing the machine, so they say how long an answer took then, not how fast one runtime is "
              "beside another: `python benchmarks/runtime_startup_bench.py` times them side by side in one run.",
              "", *sentences(rows, kept, ranks, judged, unread), "",
              "## The runtime's labels", "", "Per record (one case, one tool_choice, asked non-streamed and "
              "streamed); a record can carry several.", "", *_label_lines(kept), "",
              *replay_section(replayed, kept, served_verdicts, judged,
                             replay_label_lines(current_records(replay_records, outcomes, current)),
                             gap_lines(kept, outcomes, replay_records, current)),
              *_openings_section(opened, replay_records, current, warnings),
              "## By category", "", "BFCL's checker per category, calls due and no call due alike.", "",
              *_category_lines(rows, judged), "",
              "## Examples", "", "Up to two records per label, with the text the model generated (the strict "
              "path reads it) and the line that asks the case again.", "", *_examples(kept), ""]
    return "\n".join(lines), _html(rows, ranks, judged, glance)


def _were(records: list) -> str:
    return "was" if len(records) == 1 else "were"


def _unread_templates(records: list, model_records: dict) -> dict:
    """model id -> template id, for each model whose runtime records name the template its in-process records
    detected as reading no `tools` (status "no tools"): the same bytes, so the same verdict."""
    out = {}
    for model, found in model_records.items():
        sha = found.template.get("sha256")
        named = {r.template["id"] for r in records if r.model["id"] == model and r.template.get("sha256") == sha}
        if (found.detection or {}).get("status") == "no tools" and len(named) == 1:
            out[model] = named.pop()
    return out


def _openings_section(records: list, replay_records: list, current: dict, warnings: list) -> list:
    if not records:
        return []
    scenarios = {s.name: s for s in load_scenarios()}
    return openings_section(records, scenarios, warnings, opening_rows(replay_records, scenarios, current, warnings))


def _not_served(records: list) -> list:
    """A line per (model, runtime of the table) without records: the reason the harness gives before starting it
    (a GGUF without a template on a runtime that takes no template file), or the command that adds the row (for a
    runtime that serves no GGUF file, the script that serves the GGUF dequantized to HF form). Then a line per
    runtime asked fewer cases than the model's widest one: its rows are not ranked beside the others on those
    cases, and the reader gets the command that finishes them. Then a line per runtime that shows the text the
    model generated now but did not when some of its records were made: the command that asks those again."""
    out, short, unshown = [], [], []
    for model in sorted({r.model["id"] for r in records}):
        served = {r.server for r in records if r.model["id"] == model}
        pin = load_sources().model(model)
        mine = [r for r in records if r.model["id"] == model and r.tool_choice == "auto"]
        asked = {runtime: Counter(r.case["category"] for r in mine if r.runtime == runtime)
                 for runtime in {r.runtime for r in mine}}
        per_model = max(max(counts.values()) for counts in asked.values())
        widest = max(sum(counts.values()) for counts in asked.values())
        for name in runtimes.RUNTIMES:
            runtime = runtimes.get(name)
            if name in served:
                continue
            if not runtime.startable:
                why = f"not run yet: it serves no GGUF file, so its row is the GGUF dequantized to HF form: " \
                      f"`{_command(name, model, per_model)}`"
            elif not pin.template and runtime.template_file_flag is None:
                why = (f"takes no chat template file and the GGUF embeds none: it would prompt with a fallback of "
                       f"its own, not {pin.stand_in_template}")
            else:
                why = f"not run yet: `{_command(name, model, per_model)}`"
            out.append(f"- {model} on {name}: {why}.")
        by_runtime = {runtime: [r for r in records if r.model["id"] == model and r.runtime == runtime]
                      for runtime in asked}
        for runtime, counts in sorted(asked.items()):
            server = next(r.server for r in mine if r.runtime == runtime)
            if sum(counts.values()) < widest:
                finish = (f"`{_command(server, model, per_model)}`" if server in runtimes.RUNTIMES else
                          f"`harness deployment --endpoint URL --name {runtime} --model {model} --cases {per_model}`")
                left = _time_left(by_runtime[runtime], sum(counts.values()), widest - sum(counts.values()))
                short.append(f"- {model} on {runtime}: asked {sum(counts.values())} of the {widest} cases its "
                             f"widest runtime was asked{left}; to finish: {finish}.")
        for runtime in sorted(asked):
            theirs = by_runtime[runtime]
            server = theirs[0].server
            if server not in runtimes.RUNTIMES:
                continue
            # A record whose text the runtime gave but could not be read (llama-cpp-python's lossy token
            # strings: plain.generated_error) would be asked again for nothing.
            shows = runtimes.get(server).shown_fields or runtimes.get(server).generated_fields
            before = [r for r in theirs if shows and "generated-not-shown" in r.labels
                      and not (r.plain or {}).get("generated_error")]
            marks = runtimes.get(server).fresh_marks()
            unfresh = [r for r in theirs if any((r.request or {}).get(k) != v for k, v in marks.items())]
            said, flags = [], []
            if unfresh:
                said.append(f"{len(unfresh)} of its {len(theirs)} records {_were(unfresh)} asked without what now "
                            f"has each request evaluated afresh ({', '.join(f'`{k}`' for k in marks)}), so an "
                            "answer may have reused what the request before it left (a streamed one, the "
                            "non-streamed one's)")
                flags.append("--again stale")
            if before:
                said.append(f"{len(before)} of its {len(theirs)} records {_were(before)} made before it showed the "
                            f"text the model generated, so {'it lacks' if len(before) == 1 else 'they lack'} the "
                            "strict path")
                flags.append("--again generated-not-shown")
            if said:     # its own draw: the command asks these again and grows nothing
                unshown.append(f"- {model} on {runtime}: {'; '.join(said)}; to ask them again: "
                               f"`{_command(server, model, max(asked[runtime].values()))} {' '.join(flags)}`.")
    return out + short + unshown


def _time_left(theirs: list, cases: int, left: int) -> str:
    """How long the cases left would take at the median seconds of the runtime's requests as recorded (two a
    record: non-streamed and streamed; its records a case as it has asked them): a reader deciding whether to
    finish a slow runtime's row wants the order of it, not a promise."""
    median = median_answered_seconds(theirs)
    if median is None or not cases:
        return ""
    total = left * 2 * len(theirs) / cases * median
    span = (f"{total / 3600:.1f} h" if total >= 5400 else f"{total / 60:.0f} min" if total >= 90 else
            f"{total:.0f} s")
    return f" (about {span} more at the median {median:.1f} s its requests took as recorded)"


def _command(server: str, model: str, cases: int) -> str:
    if runtimes.get(server).startable:
        return f"harness deployment --model {model} --server {server} --cases {cases}"
    return f".venv/bin/python scripts/deployment_hf.py --server {server} --model {model} --cases {cases}"


def _html(rows: list, ranks: dict, judged: bool, glance: list) -> str:
    """The tables of deployment.md as report.html's first section: where each model's tool calling works."""
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    body = []
    for r in _in_order(rows, ranks):
        # data-model: report.html's model selector shows this model's rows alone (its setups, best first).
        body.append(f'<tr data-model="{escape(r.model)}">'
                    + "".join(f"<td>{escape(c)}</td>" for c in _cells(r, ranks[id(r)], judged)) + "</tr>")
    return ('<section id="deployment"><h2>Deployment: where does a model\'s tool calling work?</h2>'
            "<p>Each model in process and served by a runtime, on the same BFCL cases, judged by BFCL's own "
            "checker: k/n, percent, Wilson 95% interval, ranked within a model only, on the call-due cases its "
            "ranked rows share (ranked on). Choose a model above to see its setups alone, best first. The "
            'sentences, labels and per-category detail are in <a href="deployment.md">deployment.md</a>.</p>'
            + glance_html(glance)
            + f'<table class="setups"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></section>')


def write_pages(results, warnings: list, staged, first_screen: list | None = None, models: set | None = None) -> list:
    """DIR/deployment.md from the records, staged with the rest of the report, its table added to `first_screen`
    (report.html opens with it) and the models its rows name to `models` (report.html's selector offers them);
    nothing without records."""
    records = read_records(results, warnings)
    if not records:
        return []
    path = results.root / PAGE
    try:
        check_target(path, results.root)
    except UnsafeWriteError as exc:
        raise UnsafeWriteError(f"cannot write the reports into {results.root}: {exc}") from None
    markdown, html = _pages(results, records, warnings)
    if first_screen is not None:
        first_screen.append(html)
    if models is not None:
        models.update(r.model["id"] for r in records)
    return [str(staged.text(path, markdown))]
