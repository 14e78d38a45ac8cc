"""`harness pin-template`: a chat template into templates/ and its pin into sources.json."""

from __future__ import annotations

import json
from pathlib import Path

from harness.suites.command_line import EXIT_FINDING, EXIT_OK, emit_json, log
from harness.core import constants
from harness.core.errors import HarnessError
from harness.pins.pin_template import pin_template

# Where the detection tests keep the family each pinned template's model writes (a checkout's tests/).
EXPECTED_FAMILIES = "tests/template/expected_families.json"


def run_pin_template(args) -> int:
    # Rendering machinery only this command needs.
    from harness.cli.detect import print_nearest
    from harness.template.detect import detect
    from harness.core.errors import RenderLimitError

    detected = []

    def check(text: str, bos: str, eos: str) -> None:
        # Detection renders the probe before anything is written: a template past its render limits (one
        # that hangs or grows without end) would hang every command that reads the pin, so it is not pinned.
        found = detect(text, bos, eos)
        if isinstance(found._failure, RenderLimitError):
            raise HarnessError(f"{args.source}: not pinned: the template does not render within its limits "
                               f"({found.error}); nothing was written")
        detected.append(found)

    provenance = {k: getattr(args, k) for k in ("repo", "revision", "license", "bos_token", "eos_token", "note")}
    entry = pin_template(args.id, args.source, origin=args.origin, force=args.force, variant=args.variant,
                         check=check, **provenance)
    found = detected[0]
    wall = found.status == "wall"
    if args.json:
        emit_json({"entry": entry, "detected": found.to_json()})
    else:
        print(f"pinned {entry['id']}: {entry['file']} ({entry['size']} bytes, sha256 {entry['sha256']})")
        print(f"detected: {found.family or 'none'} — {found.reason}")
        print_nearest(found)
        log("review the new entry in sources.json and commit it with the template file")
        if (constants.ROOT / EXPECTED_FAMILIES).is_file():
            log(f"and add the family its model writes to {EXPECTED_FAMILIES} (detection says "
                f"{json.dumps(found.family)}; check it against the model card): "
                f"\"{entry['id']}\": {json.dumps(found.family)}")
    if wall:
        # A wall is still a pin (its failures are what conformance reports), but not one a run can read calls
        # with: said on stderr, and in the exit status.
        log(f"warning: {entry['id']} is a wall: {found.reason}. It is pinned, but tool calls rendered with it "
            f"cannot be read; exit status {EXIT_FINDING}")
        return EXIT_FINDING
    return EXIT_OK


def register(subparsers) -> None:
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
    pin.epilog = ("Nothing is written if the entry would not validate, if the template is not UTF-8 text or is over "
                  "1 MiB, or if it does not render within the sandbox's bounds; two pins at once both land "
                  "(sources.json is locked). Never edit sources.json by hand: this command validates the entry "
                  "first. Then add the family the template's model writes to tests/template/expected_families.json. "
                  "exit status: 0 pinned (detected, declared or no tools), 1 pinned but a wall (no family reads "
                  "the template's rendered call; a warning says so), 2 error (nothing written)")
    pin.set_defaults(func=run_pin_template)
