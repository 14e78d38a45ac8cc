"""The results folder: every path the harness reads or writes under it, known here and nowhere else.

    results/
      transcripts/<model>.jsonl     live samples (harness run), append-only
      runtimes/<runtime>.jsonl      runtime-check pairs, append-only
      runtime-conformance/<runtime>.jsonl   scripted replies through a runtime, append-only
      <model>.md, summary.md, heatmap.png, report.html, runtime-agreement.md, runtime-conformance.md
                                    (harness report)
      samples/<model>.<n>.html      the samples' transcripts, paged, linked from report.html (harness report)
      conformance.md, conformance.json                                          (harness conformance)
      parser-agreement/<project>.jsonl, template-detection/sglang.jsonl, parser-agreement.md
                                    peers' parsers and SGLang's template detection (harness parser-agreement)
      bfcl/<model>.jsonl            BFCL v4 cases (harness run --suite bfcl), append-only; bfcl.md (harness report)

A run or report pointed at another folder (`--results-dir`) leaves the committed one alone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.core import constants
from harness.core.hashing import sha256_text

# A name kept as it is in a file name: no separator, no leading dot (no `..`, no hidden file), short enough
# for any filesystem with the suffix added. Pinned ids and runtime names all are.
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def file_stem(name: str) -> str:
    """The file name (without suffix) a record's model id or runtime name is written under: the name itself
    when plain, else its plain characters and a hash of the whole name after a `~`, a character no plain name
    holds, so two names never share a file and none leaves the folder (`../../README`, `/etc/x`, 256 bytes)."""
    if _PLAIN.fullmatch(name):
        return name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:60]
    return f"{slug}~{sha256_text(name)[:16]}"


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
    def is_project(self) -> bool:
        """The project's own results/: the only folder the seed ADR's replays (scenarios/replays) belong to."""
        return self.root.resolve() == constants.RESULTS_DIR.resolve()

    @property
    def transcripts(self) -> Path:
        return self.root / "transcripts"

    def transcript(self, model_id: str) -> Path:
        return self.transcripts / f"{file_stem(model_id)}.jsonl"

    def transcript_files(self) -> list:
        return sorted(self.transcripts.glob("*.jsonl"))

    @property
    def runtimes(self) -> Path:
        return self.root / "runtimes"

    def runtime_records(self, runtime: str) -> Path:
        return self.runtimes / f"{file_stem(runtime)}.jsonl"

    @property
    def runtime_conformance(self) -> Path:
        return self.root / "runtime-conformance"

    def runtime_conformance_records(self, runtime: str) -> Path:
        return self.runtime_conformance / f"{file_stem(runtime)}.jsonl"

    def runtime_conformance_files(self) -> list:
        return sorted(self.runtime_conformance.glob("*.jsonl"))

    @property
    def parser_agreement(self) -> Path:
        return self.root / "parser-agreement"

    def parser_agreement_records(self, project: str) -> Path:
        return self.parser_agreement / f"{file_stem(project)}.jsonl"

    @property
    def parser_agreement_report(self) -> Path:
        return self.root / "parser-agreement.md"

    @property
    def template_detection(self) -> Path:
        """A peer's detection of each pinned template's parser (harness parser-agreement): one file per project."""
        return self.root / "template-detection"

    def template_detection_records(self, project: str) -> Path:
        return self.template_detection / f"{file_stem(project)}.jsonl"

    @property
    def bfcl(self) -> Path:
        return self.root / "bfcl"

    def bfcl_transcript(self, model_id: str) -> Path:
        return self.bfcl / f"{file_stem(model_id)}.jsonl"

    def bfcl_files(self) -> list:
        return sorted(self.bfcl.glob("*.jsonl"))

    @property
    def bfcl_report(self) -> Path:
        return self.root / "bfcl.md"

    @property
    def designs(self) -> Path:
        """A grammar design study: one results folder per grammar variant (designs/<variant>/), each run with
        `harness run --grammar-variant <variant> --results-dir DIR/designs/<variant>`."""
        return self.root / "designs"

    def design_folders(self) -> dict:
        """variant -> its ResultsDir, for every design folder the study holds."""
        if not self.designs.is_dir():
            return {}
        return {d.name: ResultsDir(d) for d in sorted(self.designs.iterdir()) if d.is_dir() and not d.is_symlink()}

    @property
    def designs_report(self) -> Path:
        return self.root / "grammar-designs.md"

    def model_table(self, model_id: str) -> Path:
        return self.root / f"{file_stem(model_id)}.md"

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
    def samples(self) -> Path:
        """Beside report.html: every sample's transcript, a page of them per file, linked from the report."""
        return self.root / "samples"

    def sample_page(self, model_id: str, page: int) -> Path:
        return self.samples / f"{file_stem(model_id)}.{page}.html"

    def sample_page_files(self) -> list:
        return sorted(self.samples.glob("*.html"))

    @property
    def runtime_agreement(self) -> Path:
        return self.root / "runtime-agreement.md"

    @property
    def conformance(self) -> tuple:
        """(markdown, JSON) of the offline conformance report."""
        return self.root / "conformance.md", self.root / "conformance.json"
