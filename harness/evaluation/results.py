"""The results folder: every path the harness reads or writes under it, known here and nowhere else.

    results/
      transcripts/<model>.jsonl     live samples (harness run), append-only
      runtimes/<runtime>.jsonl      runtime-check pairs, append-only
      runtime-conformance/<runtime>.jsonl   scripted replies through a runtime, append-only
      <model>.md, summary.md, heatmap.png, report.html, runtime-agreement.md, runtime-conformance.md
                                    (harness report)
      conformance.md, conformance.json                                          (harness conformance)

A run or report pointed at another folder (`--results-dir`) leaves the committed one alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core import constants


@dataclass(frozen=True)
class ResultsDir:
    root: Path

    @classmethod
    def at(cls, root: "Path | str | ResultsDir | None" = None) -> "ResultsDir":
        """The folder at `root`; None is the project's own results/."""
        if isinstance(root, ResultsDir):
            return root
        return cls(Path(root) if root is not None else constants.RESULTS_DIR)

    @property
    def transcripts(self) -> Path:
        return self.root / "transcripts"

    def transcript(self, model_id: str) -> Path:
        return self.transcripts / f"{model_id}.jsonl"

    def transcript_files(self) -> list:
        return sorted(self.transcripts.glob("*.jsonl"))

    @property
    def runtimes(self) -> Path:
        return self.root / "runtimes"

    def runtime_records(self, runtime: str) -> Path:
        return self.runtimes / f"{runtime}.jsonl"

    def runtime_record_files(self) -> list:
        return sorted(self.runtimes.glob("*.jsonl"))

    @property
    def runtime_conformance(self) -> Path:
        return self.root / "runtime-conformance"

    def runtime_conformance_records(self, runtime: str) -> Path:
        return self.runtime_conformance / f"{runtime}.jsonl"

    def runtime_conformance_files(self) -> list:
        return sorted(self.runtime_conformance.glob("*.jsonl"))

    @property
    def runtime_conformance_report(self) -> Path:
        return self.root / "runtime-conformance.md"

    def model_table(self, model_id: str) -> Path:
        return self.root / f"{model_id}.md"

    @property
    def summary(self) -> Path:
        return self.root / "summary.md"

    @property
    def heatmap(self) -> Path:
        return self.root / "heatmap.png"

    @property
    def html(self) -> Path:
        return self.root / "report.html"

    @property
    def runtime_agreement(self) -> Path:
        return self.root / "runtime-agreement.md"

    @property
    def conformance(self) -> tuple:
        """(markdown, JSON) of the offline conformance report."""
        return self.root / "conformance.md", self.root / "conformance.json"
