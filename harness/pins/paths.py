"""Paths named in sources.json stay inside their folder: a template's `file` inside the project tree, a model's
`filename` inside its cache folder. A pin is data anyone can edit or send in a pull request, and `../../x` or
an absolute path would make a fetch write, or a check read, anywhere on the machine."""

from pathlib import Path, PurePosixPath

from harness.core.errors import SourcesError


def relative_path_problem(value: str) -> str | None:
    """Why `value` is not a plain relative path that stays below its folder, or None when it is."""
    if not value or "\0" in value:
        return "must be a non-empty path"
    if "\\" in value or PurePosixPath(value).is_absolute() or (len(value) > 1 and value[1] == ":"):
        return "must be a relative path with / separators"
    if any(part in ("", ".", "..") for part in value.split("/")):
        return "must not contain '..', '.' or empty parts"
    return None


def inside(root: Path, relative: str, what: str) -> Path:
    """root / relative, refused when it resolves (following symbolic links) outside root."""
    root = Path(root)
    path = root / relative
    if not path.resolve().is_relative_to(root.resolve()):
        raise SourcesError(f"{what}: {relative!r} resolves to {path.resolve()}, outside {root}")
    return path
