"""The embedded backend: llama-cpp-python in this process. The only package that imports the binding, which is
the `embedded` extra (it builds from source for minutes): its modules import it at their top, and this package
checks it is installed before any of them runs (harness.core.extras), so where it is missing the message names
the extra and its install command instead of a bare ImportError deep inside a module."""

from harness.core.extras import require

require("llama_cpp", "running a GGUF in this process (the embedded backend: `harness run` without --endpoint, "
        "the live tests, llama-cpp-python's server)")
