"""The packages only an extra brings, looked up before anything imports them.

One rule for a heavy import (harness/backends/README.md, harness/backends/runtimes/README.md): the module that uses the
package imports it at its top, like any other import, and that module is itself imported only when what it
serves is asked for (through the tables in harness.backends and harness.backends.runtimes). Before that import,
`require` looks the package up without importing it and raises MissingExtraError naming the extra and its install
command, as Inspect AI's model-provider factories check a provider's package before they import its module. An
import inside a function instead would put the failure, a bare ImportError, wherever the function is first
called."""

import importlib.util

from harness.core.errors import MissingExtraError

# Import name -> (the distribution to name, the extra of harness's pyproject.toml that installs it).
EXTRA_MODULES = {
    "llama_cpp": ("llama-cpp-python", "embedded"),
    "uvicorn": ("llama-cpp-python[server]", "embedded"),
}


def require(module: str, needed_for: str) -> None:
    """MissingExtraError unless `module` (a key of EXTRA_MODULES) can be imported here; it is not imported. A
    package that is there but broken fails at its import, with its own error."""
    package, extra = EXTRA_MODULES[module]
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(package, extra, needed_for)
