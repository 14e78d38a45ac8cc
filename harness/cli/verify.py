"""`harness verify`: every pinned file on disk against its size and SHA-256 in sources.json."""

from __future__ import annotations

from collections import Counter

from harness.suites.command_line import emit_json, log
from harness.core import constants
from harness.pins.verify import BAD_STATUSES, check_all


def run_verify(args) -> int:
    checks = check_all()
    bad = [c for c in checks if c.status in BAD_STATUSES]
    if args.json:
        emit_json({"ok": not bad, "files": [c.as_json() for c in checks]})
    else:
        # Every file that needs a look gets its line; the ok and absent ones only with -v (else one summary line:
        # 78 lines of "ok" hide the one that is not).
        for c in checks:
            if c.status not in ("ok", "absent") or args.verbose:
                print(f"{c.status:8} {c.kind:8} {c.id}" + (f"  ({c.detail})" if c.detail else ""))
        counts = Counter(c.status for c in checks)
        kinds = Counter(c.kind for c in checks if c.status == "ok")
        line = (f"{counts['ok']} pinned file(s) ok ({kinds['template']} template(s), {kinds['model']} model(s), "
                f"{kinds['archive']} unpacked archive(s))")
        absent = Counter(c.kind for c in checks if c.status == "absent")
        if absent["model"]:
            line += f"; {absent['model']} pinned model(s) not in the cache {constants.MODELS_CACHE_DIR}"
        if absent["archive"]:
            line += f"; {absent['archive']} pinned archive(s) not unpacked in {constants.CACHE_DIR / 'archives'}"
        if bad:
            line += f"; {len(bad)} drifted"
        print(line + ("" if args.verbose else "; -v lists every file"))
    if bad:
        log(f"harness verify: DRIFT in {len(bad)} pinned file(s):")
        for c in bad:
            log(f"  {c.kind} {c.id}: {c.status}: {c.detail}")
        return 1
    return 0


def register(subparsers) -> None:
    verify = subparsers.add_parser(
        "verify", help="check every pinned file on disk against its size and SHA-256 in sources.json",
        description="Check every pinned template (always) and every pinned model present in the model cache "
                    "against sources.json, and every unpacked archive's files against the SHA-256 of each "
                    "recorded when it was unpacked. Exits 1 and lists every file that drifted.")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("-v", "--verbose", action="store_true", help="list every file, ok and absent ones too")
    verify.epilog = ("One summary line, a line for each file that drifted or is missing (-v: every file); any drift "
                     "fails loudly. exit status: 0 every file matches, 1 drift, 2 error")
    verify.set_defaults(func=run_verify)
