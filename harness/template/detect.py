"""Detect a template's tool-call family from the template itself.

Render a probe conversation without and with an assistant tool call, cut the difference at the
end-of-turn token: that text is exactly what the template's model is trained to write for the call. The
family whose parser reads it back as the probe call is the template's family. No template source text is
ever fingerprinted."""

import json
import copy
from dataclasses import dataclass, field

from harness import families as registry
from harness.template import render as rendering
from harness.template import sandbox_variant
from harness.template.system_tools import placement_for
from harness.core.errors import RenderLimitError, SourcesError, TemplateError
from harness.core import constants
from harness.core.hashing import sha256_text
from harness.pins.sources import load_sources
from harness.template.probe import HF_TOOLS, LLAMA_CPP_FUNCTIONS, PROBE_CALL, PROBE_TOOL, probe_messages, tool_variables

# Tokens that end an assistant turn across the pinned templates. The template's own eos_token is tried too.
END_OF_TURN = (
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "</s>", "<end_of_turn>", "<|END_OF_TURN_TOKEN|>",
    "<｜end▁of▁sentence｜>", "<|return|>", "<|call|>", "<|endoftext|>", "<|end_of_text|>", "<turn|>",
    "<|im_end_of_turn|>", "[/TOOL_CALLS]",
    "[e~[", "<seed:eos>", "<|role_end|>", "</assistant>", "<｜hy_eos:opensource｜>", "<|eot|>", "<sep>",
    "<|tool_response>", "<|calls|>",
    "<SPECIAL_12>", "<end_of_sentence>", "<|end_of_msg|>", "<|START_OF_TURN_TOKEN|>",
)

NO_TOOLS_SETTINGS = ("none",)

# Written as the content of the probe's call turn, to see whether a template that drops `tool_calls` passes
# assistant content through (LFM2 and LFM2.5-Instruct): then a call reaches the history only as caller text.
CONTENT_SENTINEL = "probe-content-7f3a"


@dataclass
class Detection:
    family: str | None
    reason: str
    rendered_call: str | None = None
    # The generation prompt up to where the reply starts; parsing a reply needs it (a forced-open <think>,
    # Functionary's >>>).
    prompt: str | None = None
    # Every family that read the call back (more than one would be a registry bug; the matrix forbids it).
    matches: tuple = ()
    # How the template wants an assistant call's arguments: a dict ("object", the Hugging Face shape) or a
    # JSON-encoded string ("string", the OpenAI wire shape some templates concatenate).
    arguments_style: str = "object"
    # The whole generation prompt of the probe. A live reply follows this, so parsing one passes it: it
    # tells whether the template opened a <think> block or Functionary's `>>>` for the model.
    generation_prompt: str | None = None
    # How the tools were passed: "tools" (Hugging Face) or "functions" (llama.cpp's Firefunction v2 variables).
    carrier: str = HF_TOOLS
    # Set when the probe conversation itself fails to render.
    error: str | None = None
    # Named facts beside the verdict: {"name", "detail"} and, for a second render, its "family".
    findings: list = field(default_factory=list)
    # A family a pin declares for a template detection cannot decide ({"family", "model_card", "parsers"}):
    # then `family` is the declared one and the status says `declared`, never `detected`.
    declared: dict | None = None
    # Where the tool list goes when the template renders calls but takes no `tools` (system_tools.Placement).
    tool_placement: object = None
    # False when offering tools leaves the prompt unchanged: the tool list is the caller's to write.
    reads_tools: bool = True
    _failure: Exception | None = field(default=None, repr=False, compare=False)
    # The detection of a wall rendered in the sandbox variant that allows list methods.
    _variant: "Detection | None" = field(default=None, repr=False, compare=False)

    @property
    def status(self) -> str:
        """detected; declared (by a pin, with its evidence); wall (the probe fails to render, or renders a call
        no family reads); no tools."""
        if self.declared:
            return "declared"
        if self.family:
            return "detected"
        return "wall" if self.error or self.rendered_call else "no tools"

    def to_json(self) -> dict:
        out = {"family": self.family, "status": self.status, "reason": self.reason,
               "rendered_call": self.rendered_call, "findings": self.findings}
        if self.declared:
            out["declared"] = self.declared
        if self.tool_placement is not None:
            out["tool_placement"] = self.tool_placement.to_json()
        return out

    def reading_family(self) -> tuple:
        """(family, generation prompt, what chose it) to read a reply with: the detected or declared family,
        else the family a wall renders once list methods are allowed (`list-methods-refused`), else None."""
        if self.family:
            return self.family, self.generation_prompt, self.status
        variant = self._variant
        if variant is not None and variant.family:
            return variant.family, variant.generation_prompt, "list-methods-refused"
        return None, None, None

    def with_declaration(self, declaration: dict | None) -> "Detection":
        """The declared family applies only where detection found none; a detected family always wins."""
        if declaration and not self.family:
            self.family, self.declared = declaration["family"], declaration
            self.reason = (f"the family {declaration['family']} comes from the template's pin in sources.json, "
                           f"not from detection ({self.reason})")
            if declaration.get("evidence"):
                self.reason += f"; {declaration['evidence']}"
            if not self.reads_tools:
                _tools_outside_template(self)
        return self


def common_prefix_length(a: str, b: str) -> int:
    # Halving on slice comparisons (done in C): renders are kilobytes, compared a few times per template.
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:         # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def reply_start(prompt: str, history: str) -> int:
    """Where the reply begins in the history render. When the generation prompt has a tail the history does
    not repeat (a forced-open `<think>`, `<|START_RESPONSE|>`), the common prefix can end inside a tag
    (`<|START_` shared with `<|START_ACTION|>`): back off to the last markup boundary."""
    shared = common_prefix_length(prompt, history)
    if shared == len(prompt):
        return shared
    head = prompt[:shared]
    return max(max(head.rfind(c) + 1 for c in ">]\n"), max(head.rfind(c) for c in "<["), 0)


def with_string_arguments(messages: list) -> list:
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
    return out


def cut_at_end_of_turn(text: str, eos_token: str | None, ends: tuple | None = None) -> str:
    """`text` up to its end of turn: the first of `ends` where a family names its own (Harmony's reply runs
    through several `<|end|>`-closed messages), else of the known end-of-turn tokens and the template's EOS."""
    tokens = list(ends) if ends else [t for t in (*END_OF_TURN, eos_token) if t]
    hits = [text.find(t) for t in tokens if t in text]
    return text[: min(hits)] if hits else text


def same_call(call, expected=PROBE_CALL) -> bool:
    """The parsed call is the probe call. Text families write every value as text ("3" for 3)."""
    if call.name != expected["name"] or set(call.arguments) != set(expected["arguments"]):
        return False
    for key, want in expected["arguments"].items():
        got = call.arguments[key]
        if got != want and not (isinstance(got, str) and got.strip() in (str(want), json.dumps(want))):
            return False
    return True


def render_probe(template: str, bos_token="", eos_token="", arguments_style="object", carrier=HF_TOOLS,
                 render=rendering.render, **kwargs):
    """Return (prompt up to the reply, generation prompt, reply region) for the probe, or raise TemplateError."""
    variables = {**tool_variables(carrier, [PROBE_TOOL]), **kwargs}
    prompt = render(template, probe_messages(with_call=False), add_generation_prompt=True,
                    bos_token=bos_token, eos_token=eos_token, **variables)
    messages = probe_messages(with_call=True)
    if arguments_style == "string":
        messages = with_string_arguments(messages)
    history = render(template, messages, add_generation_prompt=False,
                     bos_token=bos_token, eos_token=eos_token, **variables)
    start = reply_start(prompt, history)
    return prompt[:start], prompt, history[start:]


def _reads_tools(template, prompt, bos_token, eos_token, carrier, render, **kwargs) -> bool:
    try:
        without = render(template, probe_messages(with_call=False), add_generation_prompt=True,
                         bos_token=bos_token, eos_token=eos_token, **{**tool_variables(carrier, None), **kwargs})
    except RenderLimitError:
        raise
    except TemplateError:
        return True  # it fails without tools, so it reads them
    return without != prompt


def _passes_content_through(template, prompt, bos_token, eos_token, carrier, **kwargs) -> bool:
    messages = probe_messages(with_call=True)
    messages[-1]["content"] = CONTENT_SENTINEL
    try:
        history = rendering.render(template, messages, bos_token=bos_token, eos_token=eos_token,
                                   **{**tool_variables(carrier, [PROBE_TOOL]), **kwargs})
    except RenderLimitError:
        raise
    except TemplateError:
        return False
    region = history[reply_start(prompt, history):]
    return CONTENT_SENTINEL in region and PROBE_CALL["name"] not in region


def _probe(template, bos_token, eos_token, candidates, carrier, render, kwargs) -> Detection:
    # Hugging Face's shape (arguments as a dict) first; some templates concatenate a JSON string instead.
    failure = prompt = None
    for style in ("object", "string"):
        try:
            shared_prompt, prompt, reply_region = render_probe(template, bos_token, eos_token, style, carrier,
                                                               render, **kwargs)
        except RenderLimitError as exc:
            return _over_limits(exc)
        except TemplateError as exc:
            failure = failure or exc
            continue
        rendered = cut_at_end_of_turn(reply_region, eos_token)
        if PROBE_CALL["name"] in rendered:
            break
    if prompt is None:
        return Detection(None, f"the template fails to render the probe conversation: {failure}",
                         carrier=carrier, error=str(failure), _failure=failure)
    reads_tools = _reads_tools(template, prompt, bos_token, eos_token, carrier, render, **kwargs)
    if PROBE_CALL["name"] not in rendered:
        if not reads_tools:
            return Detection(None, f"no tool format: the template reads neither `{carrier}` (offered tools never "
                             "reach the model) nor an assistant's `tool_calls` (a past call renders as nothing)",
                             generation_prompt=prompt, carrier=carrier, reads_tools=False)
        found = Detection(None, "the template does not render the assistant's tool call", rendered or None,
                          shared_prompt, generation_prompt=prompt, carrier=carrier)
        if _passes_content_through(template, prompt, bos_token, eos_token, carrier, **kwargs):
            found.reason = ("the template shows the model its tools but drops the assistant's `tool_calls` and "
                            "passes its content through verbatim: a call reaches the history only as text the "
                            "caller writes into content, so no rendered call shows which family the model "
                            "writes")
            found.findings.append({"name": "calls-through-content", "detail": (
                "assistant content renders verbatim where the call would be; no call syntax is in the template")})
        return found
    names = candidates or list(registry.detectable())
    matches = []
    for name in names:
        result = registry.parse(name, rendered, shared_prompt)
        if result.accepted and len(result.calls) == 1 and same_call(result.calls[0]):
            matches.append(name)
    if not matches:
        return Detection(None, "no family's parser reads the rendered call back as the probe call",
                         rendered, shared_prompt, arguments_style=style, generation_prompt=prompt, carrier=carrier)
    reason = f"the rendered call parses back as the probe call in the {matches[0]} family"
    if len(matches) > 1:
        reason += f" (also read by: {', '.join(matches[1:])})"
    found = Detection(matches[0], reason, rendered, shared_prompt, tuple(matches), style, prompt, carrier,
                      reads_tools=reads_tools)
    if not reads_tools:
        _tools_outside_template(found)
    return found


def _tools_outside_template(found: Detection) -> None:
    """A template that renders the call but never reads `tools`: the model calls in this family, and the tool
    list is the caller's to write, where the model card says."""
    placement = placement_for(found.family)
    if not found.declared:
        found.reason += (f", but the template does not read the `{found.carrier}` variable: offered tools never "
                         "reach the model through it")
    wording = None
    if placement is None:
        detail = "no model card wording for the tool list is known for this family: live runs offer no tools"
    else:
        wording = placement.write([PROBE_TOOL])   # the card's wording, for the probe tool
        found.tool_placement = placement
        where = "the system message" if placement.message == "system" else "the first user message"
        detail = f"live runs and runtime conformance write the tool list into {where}, as {placement.source} says"
    found.findings.append({"name": "tools-in-system-prompt", "family": found.family, "detail": (
        f"The template renders an assistant's calls in the {found.family} family but never reads `tools`: the "
        f"tool list must go in the prompt by hand; {detail}."), **({"wording": wording} if wording else {})})


def detect(template: str, bos_token="", eos_token="", candidates=None, **kwargs) -> Detection:
    """Detect as Hugging Face renders. A template that takes no `tools` is tried with llama.cpp's Firefunction
    v2 variables; one the immutable sandbox refuses for `list.append` keeps that verdict, with a finding
    naming what it renders once list methods are allowed. All of it runs in the render process, in one call;
    a render past its limits ends the detection there (the template is the fault: no other variables help)."""
    try:
        return rendering.in_render_process(_detect_here, template, bos_token, eos_token, candidates, **kwargs)
    except RenderLimitError as exc:
        return _over_limits(exc)


def _over_limits(exc: RenderLimitError) -> Detection:
    return Detection(None, f"the template fails to render the probe conversation: {exc}", error=str(exc),
                     _failure=exc)


def _detect_here(template: str, bos_token="", eos_token="", candidates=None, **kwargs) -> Detection:
    found = _probe(template, bos_token, eos_token, candidates, HF_TOOLS, rendering.render, kwargs)
    if isinstance(found._failure, RenderLimitError):
        return found
    if found.error or (found.status == "no tools" and not found.rendered_call):
        other = _probe(template, bos_token, eos_token, candidates, LLAMA_CPP_FUNCTIONS, rendering.render, kwargs)
        # Only a template that reads `functions` takes its tools that way; calls it renders regardless say nothing.
        if other.family and other.reads_tools:
            other.findings.append({"name": "tools-as-functions", "detail": (
                "With Hugging Face's `tools` variable, " + found.reason + ". Rendered as llama.cpp renders Firefunction "
                "v2 (no `tools`; a `functions` JSON string and a `datetime`), the call parses as the "
                f"{other.family} family.")})
            return other
    if found.error and sandbox_variant.refused_list_method(found._failure):
        other = _probe(template, bos_token, eos_token, candidates, HF_TOOLS, sandbox_variant.render, kwargs)
        found.findings.append({"name": "list-methods-refused", "family": other.family,
                               "rendered_call": other.rendered_call,
                               "detail": f"Rendered in an {sandbox_variant.NAME}, {other.reason}."})
        found._variant = other
    return found


def declaration_for(template: str, sources=None) -> dict | None:
    """The family a pin in sources.json declares for these exact template bytes (a GGUF carrying a pinned
    template gets its declaration too), or None; outside a checkout there are no pins, so none."""
    try:
        declared = _declarations(sources or _project_sources())
    except SourcesError:
        return None
    found = declared.get(sha256_text(template))
    if found is not None:
        registry.get(found["family"])  # a declared name the registry lacks fails loudly
    return dict(found) if found is not None else None


def _declarations(sources) -> dict:
    return {pin.sha256: pin.declared_family for pin in sources.templates.values() if pin.declared_family}


_sources_seen: list = [None, None]     # (sources.json's size and mtime, its Sources)


def _project_sources():
    """The project's sources.json, read again only when it changed: conformance asks once per template."""
    path = constants.SOURCES_PATH
    try:
        info = path.stat()
        stamp = (str(path), info.st_size, info.st_mtime_ns)
    except OSError:
        stamp = None
    if stamp is None or _sources_seen[0] != stamp:
        _sources_seen[:] = [None, load_sources()]
        _sources_seen[0] = stamp
    return _sources_seen[1]


# Deviations a parser names once it has read the family's markup and is inside the call's payload: a family
# that names one of these got further into the rendered call than one that stopped at the markup.
_PAYLOAD_DEVIATIONS = frozenset({
    "python-literals", "double-braces", "nested-function-shape", "unknown-key", "missing-key", "unexpected-value",
    "invalid-json", "arguments-not-object", "stringified-arguments", "duplicate-argument", "duplicate-key",
    "non-finite-number", "number-too-long", "nesting-too-deep", "non-json-value", "lone-surrogate", "json-null",
})


def nearest_families(found: Detection) -> list:
    """For a wall that renders a call: [(family, deviation, detail)] of the families that read the call's
    markup as theirs but name what deviates, those that got into the payload first. Families that see another
    family's markers say nothing about this call and are left out."""
    if found.family or not found.rendered_call:
        return []
    near = []
    for name in registry.detectable():
        result = registry.parse(name, found.rendered_call, found.prompt or "")
        if result.deviation and result.deviation != "foreign-markers":
            near.append((name, result.deviation, result.detail))
    return sorted(near, key=lambda item: item[1] not in _PAYLOAD_DEVIATIONS)


def detect_declared(template: str, bos_token="", eos_token="", sources=None, **kwargs) -> Detection:
    """detect(), then the pinned declaration where detection finds no family: what parse and live runs use."""
    found = detect(template, bos_token, eos_token, **kwargs)
    return found.with_declaration(declaration_for(template, sources))


def resolve(setting: str, template: str, bos_token="", eos_token="", **kwargs):
    """The `tool_format` setting → (family name or None, notice or None):
    `auto` detects; `auto` with no match and `none` chat without tools; `auto` with no match says so."""
    if setting in NO_TOOLS_SETTINGS:
        return None, None
    if setting != "auto":
        registry.get(setting)
        return setting, None
    found = detect(template, bos_token, eos_token, **kwargs)
    if found.family:
        return found.family, None
    return None, (f"No tool-call format detected for this template ({found.reason}); chatting without tools. "
                  "Choose a format with the tool_format setting (--family) to enable tools.")
