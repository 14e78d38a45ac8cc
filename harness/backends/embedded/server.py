"""llama-cpp-python's own server, started by harness.backends.servers.LocalServer with llama.cpp's extra buffer
types (weight repacking) off: the AMX repacking kills it with SIGILL on some VMs (see that module's doc). Run as
`python -m harness.backends.embedded.server ARGS`, the arguments llama_cpp.server takes."""

import sys

from llama_cpp.server.__main__ import main

from harness.backends.embedded.generate import model_params


def serve(argv: list) -> None:
    sys.argv = ["llama_cpp.server", *argv]
    with model_params(use_extra_bufts=False):     # the server loads its model inside main()
        main()


if __name__ == "__main__":
    serve(sys.argv[1:])
