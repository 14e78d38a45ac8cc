"""The deployment suite (harness/suites/deployment/README.md): a real model served by a runtime, asked the
committed BFCL subset as an app asks it, judged by BFCL's checker, the runtime's labels and the strict path on
the same server. This module only declares it: its driver, page and command load when they are used."""

from __future__ import annotations

from harness.suites import FolderSuite
from harness.suites.deployment.judging import LABELS
from harness.suites.deployment.records import DEPLOYMENT, DeploymentRecord


def _write_pages(pages) -> list:
    from harness.suites.deployment.page import write_pages

    return write_pages(pages.results, pages.warnings, pages.staged, pages.first_screen, pages.models)


SUITE = FolderSuite(name=DEPLOYMENT, folder="deployment", page="deployment.md",
                    command="harness.suites.deployment.command", labels=LABELS, record=DeploymentRecord,
                    write_pages=_write_pages)
