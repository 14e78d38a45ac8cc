"""`harness fetch`: pinned templates, models and source archives, verified before anything is kept."""

from __future__ import annotations

from harness.suites.command_line import emit_json, log
from harness.core import constants
from harness.core.errors import HarnessError
from harness.pins.archives import archive_dir, is_unpacked, tree_drift, unpack_archive
from harness.pins.fetch import FetchResult, fetch_model, fetch_template
from harness.pins.sources import load_sources


def run_fetch(args) -> int:
    if args.templates is None and args.models is None and args.archives is None:
        log("harness fetch: say what to fetch: --templates [ID ...], --models [ID ...] and/or --archives [ID ...]")
        return 2
    sources = load_sources()
    results = []
    if args.archives is not None:
        # No ids: the archives pinned as default; one pinned "default": false is fetched only when named.
        pins = [sources.archive(i) for i in args.archives] if args.archives else sources.default_archives()
        results += [_fetch_archive(pin, args.find_links) for pin in pins]
    # Models first: a template read out of a GGUF (gguf-*) needs its model in the cache.
    if args.models is not None:
        pins = [sources.model(i) for i in args.models] if args.models else sources.default_models()
        for pin in pins:
            results.append(fetch_model(pin, sources, find_links=args.find_links, record_hash=args.record_hash,
                                       log=log))
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
        log(f"harness fetch: {r.kind} {r.id} FAILED: {r.detail}")
    for r in results:
        if r.status == "recorded":
            log(f"harness fetch: {r.id}: sha256 {r.sha256} ({r.size} bytes) written to sources.json; review and commit it")
    return 1 if failed else 0


def _fetch_archive(pin, find_links) -> FetchResult:
    if is_unpacked(pin):
        problems = tree_drift(pin)
        if not problems:
            return FetchResult("archive", pin.id, archive_dir(pin), "present")
        log(f"{pin.id}: {len(problems)} unpacked file(s) changed since unpacking ({problems[0]}, ...); unpacking "
            "it again")
    try:
        path = unpack_archive(pin, find_links=find_links, log=log)
    except HarnessError as exc:
        return FetchResult("archive", pin.id, archive_dir(pin), "failed", detail=str(exc))
    return FetchResult("archive", pin.id, path, "fetched", source=f"{pin.package}=={pin.version}",
                       size=pin.size, sha256=pin.sha256)


def register(subparsers) -> None:
    fetch = subparsers.add_parser(
        "fetch", help="download pinned templates and models, verified against sources.json",
        description="Fetch pinned files that are missing, verifying size and SHA-256 before anything is kept. "
                    "Files already present and matching their pin are left alone. HF_HUB_OFFLINE=1 forbids "
                    "network access; the model cache is HARNESS_CACHE, else $HF_HOME/harness.")
    fetch.add_argument("--templates", nargs="*", metavar="ID", help="template ids (none: all pinned templates)")
    fetch.add_argument("--models", nargs="*", metavar="ID", help="model ids (none: the default models)")
    fetch.add_argument("--archives", nargs="*", metavar="ID",
                       help="source archives the tests read (none: every pinned archive not marked \"default\": false), "
                            "unpacked into the cache")
    fetch.add_argument("--record-hash", action="store_true",
                       help="for a model pinned without sha256: trust the first download and write its hash")
    fetch.add_argument("--find-links", metavar="DIR", default=constants.HARNESS_WHEELS,
                       help="folder of already-downloaded wheels for registry-package sources "
                            "(default: $HARNESS_WHEELS); other wheels are fetched with pip download")
    fetch.add_argument("--json", action="store_true", help="print the results as JSON")
    fetch.add_argument("-v", "--verbose", action="store_true", help="also list templates already present")
    fetch.epilog = ("--templates downloads at the pinned revision (honours HF_ENDPOINT); the hash is checked before "
                    "anything is put in place. --models gets each model from its first source that works (the "
                    "Hub, or the registry packages that carry it), assembles it, verifies size and SHA-256 and "
                    "stores it atomically in the cache (HARNESS_CACHE, else HF_HUB_CACHE/HF_HOME); "
                    "HF_HUB_OFFLINE=1 uses the cache only. --archives: the pinned source archives the tests read "
                    "(llama.cpp's templates and vocabularies from the llama-cpp-python sdist), fetched with pip "
                    "download, hash-checked and unpacked into the cache; tests also fetch them on first use.")
    fetch.set_defaults(func=run_fetch)
