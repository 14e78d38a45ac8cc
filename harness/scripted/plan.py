"""From replies keyed to prompt lengths to scripted GGUFs: the vocabulary a template gets, a reply's tokens, and
how turns are packed into as few models as their positions allow.

A Turn owns the positions its reply runs through (after-1 … after-1+len), for every prompt. Two turns can share a
model when those ranges do not overlap, or when they are the same reply after the same prompt length (one
conversation asked several ways: tool_choice variants, streamed or not)."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import tempfile
import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.core.errors import HarnessError
from harness.core.hashing import sha256_text
from harness.scripted.builder import WEIGHTS_VERSION, Turn, build_standin, tensor_bytes
from harness.scripted.rotary import ARCH as ROTARY, ROTARY_VERSION, build_rotary, rotary_tensor_bytes, rotary_vocab
from harness.scripted.vocab import (CONTEXT_LENGTH, CONTROL, PROFILES, USER_DEFINED, Vocab, vocab_for,
                                    write_vocab_gguf)

# Which vocabulary a template gets: the first profile whose end-of-turn token the template writes (its markers are
# then real special tokens where the family has them); any other template gets GPT-2's byte-level BPE, which
# spells every string, its markers as plain text, and is a third the size of Qwen2.5's (the output head over the
# vocabulary is most of a scripted model's work per token).
_PROFILE_BY_MARKER = (("<|im_end|>", "qwen2.5"), ("<|eot_id|>", "llama3.1"), ("[INST]", "mistral"))
DEFAULT_PROFILE = "gpt2"
GPT2 = "gpt2"       # the architecture of the scripted models every llama.cpp-based runtime loads (builder.py)
# The output head (vocabulary × width) is most of a scripted model's work per token; Q8_0 stores these weights
# exactly and runs the quantized kernels.
QUANTIZED = True
# A build writes at most this much of new models unless asked for more (--max-bytes): the built-in corpus of a
# template takes a few files of ~22 MB; a few hundred user cases can take gigabytes.
DEFAULT_MAX_BYTES = 2_000_000_000


def profile_for(template: str) -> str:
    for marker, name in _PROFILE_BY_MARKER:
        if marker in template:
            return name
    return DEFAULT_PROFILE


def profile_with_tokens(template: str, family) -> str:
    """The vocabulary for `template` with its family's markers as the real model's tokens: profile_for's, plus
    every token the family lists (harness.formats.base.TOKEN_KINDS) that it lacks, of the type llama.cpp's GGUF
    converter gives the real one (its look rule applies to added tokens, not to pieces of the base vocabulary).
    A profile of its own (`gpt2+lfm2`), registered once; the base where the family lists none."""
    base = profile_for(template)
    tokens = dict(getattr(family, "tokens", None) or {})
    if not tokens:
        return base
    name = f"{base}+{family.name}"
    if name not in PROFILES:
        profile = PROFILES[base]
        added = tuple((t, CONTROL if kind == "special" or (kind == "not-special" and looks_special(t))
                       else USER_DEFINED) for t, kind in tokens.items())
        PROFILES[name] = dataclasses.replace(
            profile, name=name, appended=profile.appended + added,
            hf_special=tuple((t, kind == "special") for t, kind in tokens.items()),
            note=f"{profile.note}; plus {family.name}'s markers as the real model's tokens ({family.tokens_source})")
    return name


def looks_special(text: str) -> bool:
    """llama.cpp's GGUF converter makes these control tokens whatever the tokenizer marks (does_token_look_special
    in its convert_hf_to_gguf.py): DeepSeek's <｜…｜> and the <|…|> of most families."""
    return (text.startswith("<|") and text.endswith("|>")) or (text.startswith("<｜") and text.endswith("｜>"))


def reply_ids(vocab: Vocab, text: str) -> tuple:
    """The tokens a model of this vocabulary writes for `text`, then its end of turn: the vocabulary's special
    tokens where the text names them, the rest spelt with normal tokens (longest match, no space prefix)."""
    special = [t for t in _special_texts(vocab) if t in text]
    ids = []
    pieces = re.split("(" + "|".join(map(re.escape, special)) + ")", text) if special else [text]
    for piece in pieces:
        if piece in special:
            ids.append(vocab.id(piece))
        elif piece:
            ids += _spell(vocab, piece)
    return (*ids, vocab.id(vocab.profile.end_of_turn))


def _spell(vocab: Vocab, text: str) -> list:
    """Longest-match spelling; a character no token spells alone (an emoji in a vocabulary without it) is
    written as its UTF-8 bytes, one byte token each, as a byte-level model writes it."""
    out, run = [], ""
    for ch in text:
        try:
            vocab.segment(ch, repeats=True)
            run += ch
        except ValueError:
            out += vocab.segment(run, repeats=True) if run else []
            out += [vocab.id(bytes([b])) for b in ch.encode("utf-8")]
            run = ""
    return out + (vocab.segment(run, repeats=True) if run else [])


@functools.lru_cache(maxsize=None)
def _special_texts(vocab: Vocab) -> tuple:
    """The vocabulary's control and user-defined token texts, longest first (so `<|tool_call_start|>` is matched
    before a shorter token inside it)."""
    return tuple(sorted((t for t, k in zip(vocab.tokens, vocab.types) if k in (CONTROL, USER_DEFINED) and t),
                        key=len, reverse=True))


@dataclass
class Slot:
    """One reply at one prompt length, and the requests (keys of the caller's choosing) it answers."""
    after: int
    ids: tuple
    requests: list = field(default_factory=list)

    @property
    def span(self) -> range:
        return range(self.after - 1, self.after - 1 + len(self.ids))


@dataclass
class ModelPlan:
    slots: list = field(default_factory=list)

    def fits(self, slot: Slot) -> bool:
        return all(not _overlap(slot.span, s.span) for s in self.slots)


def _overlap(a: range, b: range) -> bool:
    return a.start < b.stop and b.start < a.stop


def pack(wanted: list) -> tuple:
    """wanted: (request key, prompt length, reply ids). Returns (models, refused) where refused holds
    (request key, why) for replies no model can hold (past the context)."""
    slots: dict = {}
    refused = []
    for request, after, ids in wanted:
        if after < 1 or after - 1 + len(ids) > CONTEXT_LENGTH:
            refused.append((request, f"a {after}-token prompt and a {len(ids)}-token reply do not fit the "
                                     f"scripted model's {CONTEXT_LENGTH} positions"))
            continue
        slots.setdefault((after, ids), Slot(after, ids)).requests.append(request)
    models: list = []
    for slot in sorted(slots.values(), key=lambda s: s.after):
        home = next((m for m in models if m.fits(slot)), None)
        if home is None:
            home = ModelPlan()
            models.append(home)
        home.slots.append(slot)
    return models, refused


@dataclass(frozen=True)
class WriteBudget:
    """How many bytes of new models one build may write, and where to say what it will write before it does."""
    max_bytes: int = DEFAULT_MAX_BYTES
    say: Callable[[str], None] | None = None


# The command line sets this for the build it asks for (its --max-bytes); every other build gets the default.
DEFAULT_BUDGET = WriteBudget()     # frozen: the one default every build without a --max-bytes shares
write_budget: ContextVar[WriteBudget] = ContextVar("scripted_write_budget", default=DEFAULT_BUDGET)


def build_models(directory: Path, stem: str, profile: str, template: str, models: list, arch: str = GPT2) -> list:
    """Write each planned model as `stem-N.gguf` in `directory`, in architecture `arch` (GPT2, or ROTARY for a
    runtime that loads no GPT-2 GGUF: harness.scripted.rotary, with the template it carries); returns their paths.
    A file whose name already says what it holds (a hash of the weights' version, template and turns) is kept: a
    resumed run does not write it again. What the new files will take is said first, and refused past the write
    budget or the free space."""
    rotary = arch == ROTARY
    vocab = rotary_vocab(profile) if rotary else vocab_for(profile) if PROFILES.get(profile) else None
    planned = []
    for n, plan in enumerate(models):
        turns = [Turn(s.after, s.ids) for s in plan.slots]
        held = [(t.after, t.reply) for t in turns]
        # The GPT-2 models' names are in committed records: their hash stays what it was.
        key = (ROTARY_VERSION, arch, profile, template, held) if rotary else (WEIGHTS_VERSION, profile, template, held)
        digest = sha256_text(repr(key))
        planned.append((Path(directory) / f"{stem}-{n}-{digest[:10]}.gguf", turns))
    _check_room(Path(directory), profile, template, vocab, [(p, t) for p, t in planned if not p.is_file()],
                len(planned), rotary)
    build = build_rotary if rotary else build_standin
    for path, turns in planned:
        if not path.is_file():
            # A name of this writer's own: two writers of one model must not write into one file.
            tmp = path.with_name(f"{path.stem}.{os.getpid()}-{threading.get_ident()}.part")
            build(tmp, profile, turns, vocab=vocab, template=template, quantized=QUANTIZED)
            tmp.replace(path)
    return [path for path, _ in planned]


def _check_room(directory: Path, profile: str, template: str, vocab, new: list, total: int, rotary: bool) -> None:
    if not new:
        return
    vocab = vocab or vocab_for(profile)
    each = _vocabulary_bytes(profile) + len(template.encode("utf-8"))
    size_of = rotary_tensor_bytes if rotary else tensor_bytes
    size = sum(each + size_of(vocab, turns, QUANTIZED) for _, turns in new)
    budget = write_budget.get()
    kept = f", {total - len(new)} already written" if total > len(new) else ""
    if budget.say:
        budget.say(f"writing {len(new)} scripted model(s) into {directory}: about {_mb(size)}{kept}")
    if size > budget.max_bytes:
        raise HarnessError(f"{len(new)} scripted models would take about {_mb(size)} in {directory}, more than "
                           f"the {_mb(budget.max_bytes)} a build may write: pass --max-bytes {size} (or more) to "
                           "write them anyway, or fewer cases (--case NAME); nothing was written")
    free = shutil.disk_usage(directory).free
    if size > free:
        raise HarnessError(f"{len(new)} scripted models would take about {_mb(size)}, and {directory} has "
                           f"{_mb(free)} free; nothing was written")


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n < 1e9 else f"{n / 1e9:,.1f} GB"


@functools.lru_cache(maxsize=None)
def _vocabulary_bytes(profile: str) -> int:
    """What a model file spends on its header and vocabulary: the same in every model of the profile."""
    with tempfile.TemporaryDirectory(prefix="scripted-size-") as tmp:
        path = Path(tmp) / "vocab.gguf"
        write_vocab_gguf(vocab_for(profile), path)
        return path.stat().st_size
