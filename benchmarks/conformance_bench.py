"""How much does `harness conformance` cost beyond the template rendering it cannot avoid?

Times, in one run, (a) the whole offline conformance (detection, round trips, full conversations, the
rejection matrix) and (b) plain jinja2 (no sandbox, no budget, compiled once per template) rendering the
same probe conversations the same number of times, and prints both and their ratio, in wall time and in CPU
time (this process's and its render process's: the steadier figure when other work shares the machine).

    python benchmarks/conformance_bench.py [--repeat 3]
"""

import argparse
import json
import resource
import statistics
import time
from datetime import datetime

import jinja2

from harness.template import conformance

from harness.template import render, render_worker
from harness.template.detect import with_string_arguments
from harness.template.probe import full_conversation, probe_messages, probe_tools
from harness.pins.sources import list_templates, resolve_template


def plain_environment():
    def raise_exception(message):
        raise jinja2.TemplateError(message)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def probe_renders(bos, eos):
    """The renders conformance needs for one template (both argument styles of the call, as detection may)."""
    tools = probe_tools()
    common = {"bos_token": bos, "eos_token": eos}
    call = probe_messages(True)
    return [
        dict(messages=probe_messages(False), tools=tools, add_generation_prompt=True, **common),
        dict(messages=call, tools=tools, add_generation_prompt=False, **common),
        dict(messages=with_string_arguments(call), tools=tools, add_generation_prompt=False, **common),
        dict(messages=probe_messages(False), tools=None, add_generation_prompt=True, **common),
        dict(messages=full_conversation(), tools=tools, add_generation_prompt=True, **common),
    ]


def _cpu() -> float:
    # This process and its finished children: the render process is stopped (and so counted) before reading.
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def jinja_only(refs) -> tuple:
    start, cpu = time.perf_counter(), _cpu()
    env = plain_environment()
    for ref in refs:
        try:
            compiled = env.from_string(ref.text)
        except jinja2.TemplateError:
            continue
        for variables in probe_renders(ref.bos_token or "", ref.eos_token or ""):
            try:
                compiled.render(**variables)
            except Exception:  # noqa: BLE001 -- a template that fails costs its attempt, as in conformance
                pass
    return time.perf_counter() - start, _cpu() - cpu


def full_conformance(refs) -> tuple:
    # Start cold, as the jinja2 baseline does: compiling is part of the cost. Templates compile in the render
    # process, so a fresh one is forked inside the timed part (its start is part of the cost too).
    render.compiled_cached.cache_clear()
    render._compile_in.cache_clear()
    render.template_variables.cache_clear()
    render_worker.stop()
    start, cpu = time.perf_counter(), _cpu()
    conformance.run(refs)
    wall = time.perf_counter() - start
    render_worker.stop()          # its CPU time counts once it has exited
    return wall, _cpu() - cpu


def main():
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    refs = [resolve_template(pin.id) for pin in list_templates()]
    base, ours = [], []
    for _ in range(args.repeat):
        base.append(jinja_only(refs))
        ours.append(full_conformance(refs))
    b, o = (statistics.median(t[0] for t in base), statistics.median(t[0] for t in ours))
    bc, oc = (statistics.median(t[1] for t in base), statistics.median(t[1] for t in ours))
    print(f"templates: {len(refs)}, repeats: {args.repeat} (medians)")
    print(f"jinja2 alone, same probe renders : {b:8.3f} s   CPU {bc:8.3f} s")
    print(f"harness conformance (everything) : {o:8.3f} s   CPU {oc:8.3f} s")
    print(f"ratio conformance / jinja2       : {o / b:8.2f}x  CPU {oc / bc:8.2f}x")
    # CPU time (the render process's included) is the steadier figure on a machine others load.


if __name__ == "__main__":
    main()
