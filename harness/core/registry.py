"""One kind of plug-in table: a name a user types, and where its implementation lives ("module:object", or
"module" for a whole module), imported only when that name is asked for.

Backends, runtimes, runtime suites and commands each keep one Registry, so each is extended the same way (one
line in its table) and fails the same way: an unknown name is refused with the known ones listed, and an entry
whose module or object is missing names the entry and what it pointed at. Importing lazily keeps `harness
--help` and `harness list` from loading what a name's implementation needs (the binding, a server's client).

The peers worker's drivers are the one table that is not a Registry: that file runs under another project's
python and imports nothing from harness (harness/peers/worker.py)."""

from __future__ import annotations

import importlib
from typing import Iterator

from harness.core.errors import HarnessError


class Registry:
    """name -> "module:object" (or "module"), in the order given; `get(name)` imports and returns the object."""

    def __init__(self, kind: str, entries: dict):
        for name, where in entries.items():
            module, _, attribute = where.partition(":")
            if not name or not module or where.count(":") > 1 or (":" in where and not attribute):
                raise ValueError(f"{kind} {name!r}: {where!r} is not 'module:object' or 'module'")
        self.kind = kind
        self._entries = dict(entries)
        self._loaded: dict = {}

    def __contains__(self, name) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> str:
        """Where `name` lives ("module:object"), without importing it."""
        self._known(name)
        return self._entries[name]

    def names(self) -> tuple:
        return tuple(self._entries)

    def items(self):
        return self._entries.items()

    def _known(self, name: str) -> None:
        if name not in self._entries:
            raise HarnessError(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}")

    def get(self, name: str):
        """The object registered as `name`, imported on first use (the same object every later call)."""
        self._known(name)
        if name not in self._loaded:
            where = self._entries[name]
            module_name, _, attribute = where.partition(":")
            module = importlib.import_module(module_name)
            if not attribute:
                self._loaded[name] = module
            elif not hasattr(module, attribute):
                raise HarnessError(f"{self.kind} {name!r} is registered as {where}, but {module_name} "
                                   f"has no {attribute}")
            else:
                self._loaded[name] = getattr(module, attribute)
        return self._loaded[name]

    def every(self) -> list:
        """Every registered object, in the table's order (imports them all)."""
        return [self.get(name) for name in self._entries]
