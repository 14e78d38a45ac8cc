"""The one way the harness names a text by its hash: SHA-256 of its UTF-8 bytes, as hex. Transcripts record
templates, prompts, replies and grammars this way, so two records agree on a text exactly when the hashes do."""

import hashlib


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
