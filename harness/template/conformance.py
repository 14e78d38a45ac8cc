"""Offline conformance of every pinned template: detection, round trip of the rendered call, whether a
whole tool conversation renders, and walls. No model, no network."""

import json

from harness import __version__

from harness.core.hashing import sha256_text
from harness.template import matrix
from harness import families as registry
from harness.template.detect import Detection, declaration_for, detect_declared, with_string_arguments
from harness.core.errors import RenderLimitError, TemplateError
from harness.template.probe import HF_TOOLS, full_conversation, probe_tools, tool_variables
from harness.template.render import in_render_process, map_in_render_process, render
from harness.template.round_trip import round_trip
from harness.template.walls import wall_for


def full_conversation_renders(template: str, bos: str, eos: str, arguments_style: str, carrier: str = HF_TOOLS):
    messages = full_conversation()
    if arguments_style == "string":
        messages = with_string_arguments(messages)
    try:
        render(template, messages, add_generation_prompt=True, bos_token=bos, eos_token=eos,
               **tool_variables(carrier, probe_tools()))
    except TemplateError as exc:
        return False, str(exc)
    return True, None


def check_template(ref) -> dict:
    """ref: a resolved template (id, text, bos_token, eos_token, sha256). Every render of the check runs in
    the render process in one call, each render bounded there."""
    try:
        return in_render_process(_check_here, ref)
    except RenderLimitError as exc:
        return _overrun_row(ref, exc)


def check_templates(refs) -> list:
    """check_template of each, all in one batch in the render process."""
    rows = []
    for ref, (ok, value) in zip(refs, map_in_render_process(_check_here, list(refs))):
        if not ok and not isinstance(value, RenderLimitError):
            raise value
        rows.append(value if ok else _overrun_row(ref, value))
    return rows


def _overrun_row(ref, exc: RenderLimitError) -> dict:
    # The render process was killed mid-check: the template is a wall whose probe does not render.
    found = Detection(None, f"the template fails to render the probe conversation: {exc}", error=str(exc))
    return _row(ref, found.with_declaration(declaration_for(ref.text)), False, str(exc), None)


def _check_here(ref) -> dict:
    text = ref.text
    found = detect_declared(text, ref.bos_token or "", ref.eos_token or "")
    if found.error and isinstance(found._failure, RenderLimitError):
        return _row(ref, found, False, found.error, None)
    renders, render_error = full_conversation_renders(text, ref.bos_token or "", ref.eos_token or "",
                                                      found.arguments_style, found.carrier)
    trip = round_trip(text, found, ref.bos_token or "", ref.eos_token or "")
    return _row(ref, found, renders, render_error, trip)


def _row(ref, found, renders: bool, render_error: str | None, trip) -> dict:
    text = ref.text
    wall = wall_for(ref.id)
    status = "wall" if wall and not found.family else found.status
    return {
        "id": ref.id,
        "sha256": sha256_text(text),
        "family": found.family,
        "status": status,
        "reason": found.reason,
        "wall": wall,
        "arguments_style": found.arguments_style,
        "tool_variables": found.carrier,
        "findings": found.findings,
        "declared": found.declared,
        "rendered_call": found.rendered_call,
        "prompt_tail": (found.prompt or "")[-80:] if found.prompt else None,
        # None where no family read a rendered call (declared, wall, no tools).
        "round_trips": None if trip is None else trip["same"],
        "round_trip": trip,
        "full_conversation_renders": renders,
        "full_conversation_error": render_error,
        "_prompt": found.prompt or "",
    }


def run(refs) -> dict:
    rows = check_templates(refs)
    prompts = {row["id"]: row.pop("_prompt") for row in rows}
    result = matrix.run(rows, prompts)
    families = registry.detectable()
    return {
        "harness_version": __version__,
        "families": [
            {"name": f.name, "label": f.label, "detail": f.detail, "markers": list(f.markers),
             "start_only": f.start_only, "templates": sorted(r["id"] + (" (declared)" if r["status"] == "declared" else "")
                                                         for r in rows if r["family"] == f.name)}
            for f in families.values()
        ],
        "templates": rows,
        "matrix": result,
        "summary": {
            "templates": len(rows),
            "detected": sum(r["status"] == "detected" for r in rows),
            "declared": sum(r["status"] == "declared" for r in rows),
            "walls": sum(r["status"] == "wall" for r in rows),
            "no_tools": sum(r["status"] == "no tools" for r in rows),
            "full_conversation_failures": sum(not r["full_conversation_renders"] for r in rows),
            "round_trip_failures": sum(r["round_trips"] is False for r in rows),
            "families": len(families),
            "matrix_cases": len(result["cells"]),
            "matrix_violations": len(result["violations"]),
        },
    }


def dumps(report: dict) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2, sort_keys=False) + "\n"
