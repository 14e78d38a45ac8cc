"""Arguments typed by JSON Schema: a tool's parameters checked and read (arguments.py), schema loading that
never fetches a remote `$ref` (schemas.py) and regular expressions run without backtracking (safe_regex.py).
Scoring, grammars, the CLI's parse and the runners read calls through it; no family depends on it."""
