"""The stand-in the tool-loop tests share: a GGUF with Qwen2.5's vocabulary and chat template (Hermes calls)
built from a script, opened as a DrivenModel, and a one-tool `ping` scenario to run it on."""

import re

from harness.scripted import PROFILES, Vocab, build_standin

from harness.evaluation.scenario_files import load_scenarios
from harness.live.tool_loop import DrivenModel
from harness.template.kwargs import template_kwargs_for

CALL = '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'


def scripted_ids(vocab, text, trigger):
    """`text` as token ids that never contain `trigger`'s id, the Hermes markers as their special tokens."""
    ids, used = [], [vocab.id(trigger)]
    for piece in re.split(r"(<tool_call>|</tool_call>)", text):
        if piece in ("<tool_call>", "</tool_call>"):
            ids.append(vocab.id(piece))
        elif piece:
            ids += vocab.segment(piece, avoid=used + ids)
    return tuple(ids)


def standin_chat(directory, name, scripts) -> DrivenModel:
    from harness.backends.embedded.backend import EmbeddedBackend

    path = directory / f"{name}.gguf"
    build_standin(path, "qwen2.5", scripts, vocab=Vocab(PROFILES["qwen2.5"]))
    backend = EmbeddedBackend.load(path, n_ctx=1024)
    template = backend.embedded_template()
    return DrivenModel(backend, template, "", "<|im_end|>", "hermes", template_kwargs_for(template))


def ping_scenario(directory, tool: str, max_steps=1, sampling=""):
    """A scenario offering one `ping` tool (`tool`: its YAML lines after the description) and expecting it."""
    (directory / "s.yaml").write_text(f"""\
name: ping
description: scripted
max_steps: {max_steps}
{sampling}tools:
  - name: ping
    description: Check the relay.
{tool}
conversation:
  turns:
    - user: Ping the relay.
      expect: {{tool: ping}}
""")
    return load_scenarios(directory)[0]
