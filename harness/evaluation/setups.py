"""Which recorded samples were written under today's setup (mode, grammar, fallback rule, sampling), so a report
counts only those: a sample recorded under an older grammar is superseded, never mixed with current ones.

A fallback sample is also outdated when a native attempt it rewrote would not be rewritten today, or one it let
stand would be (retries_as_today): the rule that reads a call attempt can change (a copied tool definition stopped
counting as one) while the grammar stays the same, and the sample's later steps followed from the old decision.

Today's setup is rebuilt from the transcript's model record (the family and template the model ran with) and
the scenario, as the run builds it (harness.grammar.plan); nothing is generated."""

from __future__ import annotations

from harness import families
from harness.core.hashing import sha256_text
from harness.evaluation.scoring import retry_due
from harness.storage.records import ModelRecord, SampleRecord
from harness.grammar.plan import grammar_plan, recorded_variant, setup_digest


class CurrentSetups:
    """Fed the model records of a transcript as they are read; answers whether a sample's setup is today's.
    variant: the grammar design the folder's samples are judged as (harness.grammar.plan.folder_variant): a
    sample written under another is outdated."""

    def __init__(self, variant: str):
        self._models: dict = {}
        self._made: dict = {}
        self.variant = variant

    def add(self, record: ModelRecord) -> None:
        self._models[(record.model.id, record.model.sha256)] = record

    def outdated(self, record: SampleRecord, scenario) -> bool:
        """True when the sample was written under another setup than a run would use today. A sample whose model
        record is not in the transcript, or that keeps no grammar hash (a hand-made record), cannot be checked, and is
        taken as it is."""
        model = self._models.get((record.model.id, record.model.sha256))
        if record.mode == "fallback" and not retries_as_today(record, [t.name for t in scenario.tools]):
            return True
        if model is None or record.mode == "native" or "gbnf_sha256" not in (record.grammar or {}):
            return False
        template = (model.template or {}).get("text")
        # Judged against today's build of the design it was run with, which must be the folder's design.
        variant = recorded_variant(record.grammar)
        if variant != self.variant:
            return True
        example = (model.detection or {}).get("rendered_call")
        key = (record.family, sha256_text(template or ""), scenario.name, scenario.hash, variant, example)
        if key not in self._made:     # one build serves grammar and fallback samples of the case alike
            try:
                self._made[key] = grammar_plan(record.family, scenario, template, variant, example)
            except Exception:  # noqa: BLE001 -- a grammar that cannot be built today: nothing to compare with
                self._made[key] = None
        plan = self._made[key]
        return plan is not None and setup_digest(record.mode, plan.to_json(record.mode)) != record.setup()


def retries_as_today(record: SampleRecord, tools) -> bool:
    """Whether fallback today (scoring.retry_due) makes each decision this fallback sample made: every native
    attempt it rewrote (a step's fallback_from) is one it would rewrite, and every step that stood as the model
    wrote it (read by the model's own parser) is one it would let stand. tools: the names the sample offered."""
    for turn in record.turns:
        for step in turn.get("steps", []):
            if step.get("error") or step.get("synthesized"):
                continue
            native, rewritten = (step["fallback_from"], True) if step.get("fallback_from") else (step, False)
            # Steps without fallback_from are the native attempts that stood: every retry keeps the one it replaced.
            parse = families.parse(native.get("family", record.family), native.get("reply") or "",
                                   native.get("prompt_tail") or "")
            if retry_due(parse, tools) != rewritten:
                return False
    return True
