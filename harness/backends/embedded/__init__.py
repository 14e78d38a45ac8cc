"""The embedded backend: llama-cpp-python in this process. The only package that imports the binding, which is
the `embedded` extra (it builds from source for minutes): where it is missing, importing this package says so,
naming the extra and its install command, instead of failing deep inside a module with a bare ImportError."""

from harness.core.errors import MissingExtraError

BINDING, EXTRA = "llama-cpp-python", "embedded"

try:
    import llama_cpp  # noqa: F401  (checked here once, for every module of the package)
except ModuleNotFoundError as exc:
    if exc.name != "llama_cpp":
        raise           # the binding is there but broken: its own error says more
    raise MissingExtraError(BINDING, EXTRA, "running a GGUF in this process (the embedded backend: `harness run` "
                            "without --endpoint, the live tests, llama-cpp-python's server)") from None
