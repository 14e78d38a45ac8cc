"""Which samples a run still has to write: the key each sample is recorded under, the setup it gets today (its
mode and grammar as the transcript keeps them), and so the samples not yet recorded or recorded under another
setup, which a run writes again and whose new record supersedes the old."""

from __future__ import annotations

from harness.storage.records import ModelRef
from harness.evaluation.setups import retries_as_today
from harness.grammar import GrammarError
from harness.grammar.plan import DEFAULT_VARIANT, planned_setup, setup_digest, unbuildable_grammar

MODE = "native"  # the mode of a run that names none (harness.live.modes); the mode is part of every record and key
# The setup a done sample is given when its recorded fallback decisions are not today's: no plan gives it, so the
# sample runs again and its new record supersedes the old.
RETRIES_CHANGED = "retries-changed"


def sample_seed(base_seed: int, index: int) -> int:
    return base_seed + index


def planned_key(model, scenario, index: int, base_seed: int, mode: str = MODE) -> tuple:
    """The key (SampleRecord.key) the sample will be recorded under: resume skips it when it is there."""
    return (model.id, model.sha256, scenario.name, scenario.hash, mode, index, sample_seed(base_seed, index))


def modes_for(scenario, model_modes=None, requested=None) -> tuple:
    """The modes a run uses for one scenario on one model: those asked for (--mode), else the scenario's own,
    else the model's (sources.json), else native."""
    return tuple(requested or scenario.modes or model_modes or (MODE,))


# A case's modes run back to back (a run goes case by case) in the order that lets each read again the least of
# its prompt: the binding keeps the longest prefix it already evaluated. Fallback's first attempt is native's
# prompt; its retry's preamble (the tools, then how to call) opens as a preamble-carrying grammar design's does,
# so grammar after a retry reads only their different ends. Asked in another order (--mode grammar,native), the
# same samples are written, each to its own key.
REUSE_ORDER = ("native", "fallback", "grammar")


def in_reuse_order(modes) -> tuple:
    return tuple(sorted(modes, key=lambda m: REUSE_ORDER.index(m) if m in REUSE_ORDER else len(REUSE_ORDER)))


def planned_count(scenarios, samples: int | None, model_modes=None, requested=None) -> int:
    """How many samples a run plans for one model, done or not."""
    return sum((samples or s.samples) * len(modes_for(s, model_modes, requested)) for s in scenarios)


def pending(model_id: str, sha256: str, scenarios, samples: int | None, base_seed: int, done,
            modes=None, model_modes=None, setup_of=None) -> list:
    """(scenario, mode, [sample indices still to run]) for every scenario and mode (see modes_for), in order.
    done: the keys recorded (a set), or key -> the setup it was recorded under (Transcript.done_setups); with
    setup_of(scenario, mode), the setup a sample gets today, a sample recorded under another one runs again."""
    ident = ModelRef(model_id, sha256)
    out = []
    for scenario in scenarios:
        n = samples or scenario.samples
        for mode in in_reuse_order(modes_for(scenario, model_modes, modes)):
            today = setup_of(scenario, mode) if setup_of is not None and isinstance(done, dict) else None
            todo = [i for i in range(n) if (key := planned_key(ident, scenario, i, base_seed, mode)) not in done
                    or (today is not None and done[key] != today)]
            out.append((scenario, mode, todo))
    return out


def superseding(work: list, done, model_id: str, sha256: str, base_seed: int) -> int:
    """How many of the samples in `work` are recorded already (under another setup): each is run again and its
    new record supersedes the old."""
    ident = ModelRef(model_id, sha256)
    return sum(planned_key(ident, scenario, i, base_seed, mode) in done
               for scenario, mode, todo in work for i in todo)


def example_of(model) -> str | None:
    """The probe call as the model's template renders it (detection's), which native-example shows."""
    return getattr(model.detection, "rendered_call", None)


def setup_inputs(model) -> tuple:
    return model.chat.family, model.chat.template, example_of(model)


def setups_for(family: str | None, template: str | None, variant: str = DEFAULT_VARIANT, example: str | None = None):
    """setup_of for pending(): the setup each scenario and mode gets today for a model of this family and
    template (example: its rendered probe call), each grammar built once."""
    made = {}

    def setup_of(scenario, mode):
        key = (scenario.name, scenario.hash, mode)
        if key not in made:
            try:
                made[key] = planned_setup(mode, family, scenario, template, variant, example)
            except GrammarError as exc:
                made[key] = setup_digest(mode, unbuildable_grammar(exc))
        return made[key]
    return setup_of


def stale_retries(transcript, scenarios) -> set:
    """Keys of the fallback samples in `transcript` (the latest record of each) whose recorded retries today's
    rule would not make (harness.evaluation.setups.retries_as_today), among `scenarios`: a run writes them again."""
    tools = {s.name: [t.name for t in s.tools] for s in scenarios}
    return {r.key() for r in transcript.samples()
            if r.mode == "fallback" and r.scenario.name in tools and not retries_as_today(r, tools[r.scenario.name])}
