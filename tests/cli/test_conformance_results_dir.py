"""`harness conformance --results-dir X` where X cannot take the report: a file, a folder under a file, a read-only
folder, a full disk. Said before the minutes of work, as one clear error; a write that fails after the work (the
disk filled meanwhile) is one clear error too, never a traceback."""

import errno
import os

import pytest

from harness.cli import main
from harness.cli import conformance as conformance_cli
from harness.reports import conformance as conformance_report


def _no_work(*_args, **_kwargs):
    raise AssertionError("the conformance run started although its results folder cannot be written")


def _a_file(tmp_path, monkeypatch):
    (tmp_path / "results").write_text("a file, not a folder\n")
    return tmp_path / "results"


def _under_a_file(tmp_path, monkeypatch):
    (tmp_path / "results").write_text("a file, not a folder\n")
    return tmp_path / "results" / "conformance"


def _read_only(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder; the other cases cover the same check")
    folder = tmp_path / "results"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


def _full(tmp_path, monkeypatch):
    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", no_space)
    return tmp_path / "results"


@pytest.mark.parametrize("folder", [_a_file, _under_a_file, _read_only, _full],
                         ids=["a-file", "under-a-file", "read-only", "full"])
def test_a_results_dir_that_cannot_be_written_is_said_before_the_work(tmp_path, monkeypatch, capsys, folder):
    results = folder(tmp_path, monkeypatch)
    monkeypatch.setattr(conformance_cli.conformance, "run", _no_work)
    assert main(["conformance", "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write conformance.md and conformance.json into {results}" in err, err
    assert "Traceback" not in err


def test_a_write_that_fails_after_the_work_is_a_clear_error(tmp_path, monkeypatch, capsys):
    def disk_filled(path, data, root):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(conformance_cli, "list_templates", list)      # the work, over no template
    monkeypatch.setattr(conformance_report, "write_atomically", disk_filled)
    assert main(["conformance", "--results-dir", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the conformance report into {tmp_path / 'results'}: No space left on device" in err, err
    assert "Traceback" not in err
