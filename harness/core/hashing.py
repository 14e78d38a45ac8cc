"""The one way the harness names a text by its hash: SHA-256 of its UTF-8 bytes, as hex. Transcripts record
templates, prompts, replies and grammars this way, so two records agree on a text exactly when the hashes do; file
names, case and reply keys are the same digest, cut short.

A lone surrogate (a JSON "\\ud800" escape decodes to one, and records keep it) is hashed as the bytes UTF-8 would
give it were it allowed (surrogatepass) instead of raising: every other text has the digest it always had."""

import hashlib
import json


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sha256_json(value, **dumps) -> str:
    """sha256_text of `value` written as JSON with its keys sorted and its characters as they are (not \\u
    escapes), so values equal as JSON share a digest. `dumps`: json.dumps's other arguments (default=str)."""
    return sha256_text(json.dumps(value, sort_keys=True, ensure_ascii=False, **dumps))
