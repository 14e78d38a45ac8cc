"""A runtime beside its newer build (llama-server, llama.cpp 0.5.0, beside llama-server-next, 0.6.0-dev): which root
causes of the older one the newer one fixed, which are still there, which are new, and how many of the same
requests (template, case and its hash, variant) got the same labels. Causes are compared over the requests both
were asked only (a template pinned after one runtime's run would otherwise count as a cause "new" in the other);
the requests only one was asked are counted apart. Computed from the two runtimes' records alone, as every
section of the runtime-conformance page is."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.suites.runtime_conformance.causes import CAUSE_ORDER, DOES, root_causes

FIXED, STILL, NEW = "fixed", "still there", "new"


@dataclass
class CauseChange:
    label: str
    qualifier: str | None
    older: list                 # the older runtime's records under this cause
    newer: list                 # the newer one's

    @property
    def status(self) -> str:
        return FIXED if not self.newer else NEW if not self.older else STILL

    @property
    def does(self) -> str:
        return DOES[self.label].format(q=self.qualifier)


@dataclass
class VersionComparison:
    older: str                  # the records' runtime names
    newer: str
    changes: list               # CauseChange, the older runtime's causes first (most requests first), then new ones
    shared: int                 # requests both asked
    same_labels: int            # of those, how many got the same labels
    differing: list = field(default_factory=list)     # (older record, newer record) whose labels differ
    only_older: list = field(default_factory=list)    # records of requests the newer one was not asked
    only_newer: list = field(default_factory=list)    # and the other way round

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.changes)


def _labels(record) -> list:
    return sorted(record.labels)


def compare(records: list, older: str, newer: str) -> VersionComparison | None:
    """The causes of runtime `older` (a record name) beside those of `newer`; None unless both have records."""
    old_all = [r for r in records if r.runtime == older]
    new_all = [r for r in records if r.runtime == newer]
    if not old_all or not new_all:
        return None
    both = {r.done_key() for r in old_all} & {r.done_key() for r in new_all}
    old = [r for r in old_all if r.done_key() in both]
    new = [r for r in new_all if r.done_key() in both]
    old_causes = {(c.label, c.qualifier): c for c in root_causes(old)}
    new_causes = {(c.label, c.qualifier): c for c in root_causes(new)}
    changes = [CauseChange(*key, cause.records, new_causes[key].records if key in new_causes else [])
               for key, cause in old_causes.items()]
    changes += sorted((CauseChange(*key, [], cause.records) for key, cause in new_causes.items()
                       if key not in old_causes),
                      key=lambda c: (-len(c.newer), CAUSE_ORDER.index(c.label), c.qualifier or ""))
    by_key = {r.done_key(): r for r in new}
    pairs = [(r, by_key[r.done_key()]) for r in old if r.done_key() in by_key]
    differing = [(a, b) for a, b in pairs if _labels(a) != _labels(b)]
    return VersionComparison(older, newer, changes, len(pairs), len(pairs) - len(differing), differing,
                             [r for r in old_all if r.done_key() not in both],
                             [r for r in new_all if r.done_key() not in both])


def comparison_lines(comparison: VersionComparison, older_version: str, newer_version: str, replay) -> list:
    """The page section: a summary line with the figures, then one row per cause (what the runtime does, its
    requests in each version, fixed / still there / new, a replay on the version that shows it)."""
    c = comparison
    lines = [f"## {c.older} (llama.cpp {older_version}) beside {c.newer} (llama.cpp {newer_version})", "",
             f"Each root cause of {c.older} beside {c.newer}, by what the runtime does (its label and qualifier), "
             f"over the {c.shared} requests both were asked (same template, case and variant): **{c.count(FIXED)} "
             f"fixed, {c.count(STILL)} still there, {c.count(NEW)} new**; **{c.same_labels}/{c.shared} requests got "
             "the same labels**.", "",
             f"| cause | {c.older} | {c.newer} | status | replay |", "|---|---:|---:|---|---|"]
    for change in c.changes:
        shown = (change.newer or change.older)[0]
        lines.append(f"| {change.does} | {len(change.older)} | {len(change.newer)} | {change.status} | "
                     f"`{replay(shown)}` |")
    for runtime, only in ((c.older, c.only_older), (c.newer, c.only_newer)):
        if only:
            templates = sorted({r.template["id"] for r in only})
            agree = sum(r.labels == ["agree"] for r in only)
            lines += ["", f"Asked of {runtime} only ({len(only)} requests, not compared: {', '.join(templates)}): "
                      f"{agree} agree; their causes are among {runtime}'s root causes above."]
    if c.differing:
        lines += ["", f"Requests whose labels differ ({len(c.differing)}):", ""]
        lines += [f"- {a.template['id']} / {a.case['name']}/{a.variant}: `{'`, `'.join(a.labels)}` → "
                  f"`{'`, `'.join(b.labels)}`" for a, b in sorted(c.differing, key=lambda p: p[0].done_key())]
    return lines
