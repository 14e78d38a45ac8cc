"""Hostile chat templates: each ends in a clear TemplateError, or renders within the limits, quickly.

All of them run in one child process under an address-space limit, so a guard that lets a gigabyte through fails
its test with a MemoryError or a kill instead of taking the machine down, and a crash of any kind is reported
against the template that caused it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from harness.template.render import MAX_OUTPUT_CHARS

STOPPED = r"^render stopped"
NO_COMPILE = r"^template does not compile"
REFUSED = r"^sandbox refused at line \d+: .*unsafe"
SIZE = r"^render stopped at line 1: .*(would build about \d+ characters|more than \d+ (items|characters|bits))"
PIECES = r"^render stopped at line 1: \|(slice) was asked for \d+ pieces"
TIME = r"^render stopped( at line \d+)?: render took longer than 1 s"
RECURSION = r"^render stopped: recursion too deep"
BIG_RANGE = r"^render failed at line 1: OverflowError: Range too big"
OK = None

A8M = "{% set a = 'x' * 8000000 %}"
NESTED_IFS = "{% if 1 %}" * 200 + "x" + "{% endif %}" * 200

HOSTILE = [
    # Filters that build their result in one call.
    ("center", "{{ ''|center(10**9) }}", SIZE),
    ("center-text", "{{ 'x'|center(999999999) }}", SIZE),
    ("indent-many-lines", "{{ ('x\\n' * 100000)|indent(10**4) }}", SIZE),
    ("indent-wide", "{{ 'x\\ny'|indent(10**9) }}", SIZE),
    ("indent-first", "{{ 'x'|indent(width=10**9, first=true) }}", SIZE),
    ("indent-by-string", "{{ ('x\\n' * 1000000)|indent('y' * 100) }}", SIZE),
    ("format-width", "{{ '%999999999s'|format(1) }}", SIZE),
    ("format-precision", "{{ '%.999999999f'|format(1.5) }}", SIZE),
    ("format-star", "{{ '%*s'|format(999999999, 'x') }}", SIZE),
    ("format-named", "{{ '%(a)999999999s'|format(a=1) }}", SIZE),
    ("lipsum-paragraphs", "{{ lipsum(10**6) }}", SIZE),
    ("lipsum-words", "{{ lipsum(1, min=10**8, max=10**8 + 1) }}", SIZE),
    ("lipsum-keywords", "{{ lipsum(n=10**4, max=10**4) }}", SIZE),
    ("slice-of-big-range", "{{ range(10**7)|slice(10**7) }}", BIG_RANGE),
    ("slice-pieces", "{{ range(10)|slice(10**8)|list|length }}", PIECES),
    ("slice-filled", "{{ range(99999)|slice(99999999, 0)|list|length }}", PIECES),
    ("batch-filled", "{{ [1]|batch(10**9, 0)|list }}", SIZE),
    ("replace-grows", "{{ ('x' * 1000000)|replace('x', 'y' * 12) }}", SIZE),
    ("replace-empty", "{{ 'abc'|replace('', 'x' * 5000000) }}", SIZE),
    ("join-separator", "{{ (['a'] * 100000)|join('y' * 10000) }}", SIZE),
    ("join-items", "{{ (['x' * 1000000] * 100)|join }}", SIZE),
    ("join-chars", "{{ ('ab' * 4000000)|list|join(',') }}", SIZE),
    ("tojson-items", "{{ (['x' * 100000] * 1000)|tojson }}", SIZE),
    ("tojson-indent", "{{ [[[[[[[[[[1]]]]]]]]]]|tojson(indent=10**6) }}", SIZE),
    ("pprint", "{{ (['x' * 1000000] * 100)|pprint }}", SIZE),
    ("escape-expands", "{{ ('&' * 8000000)|e }}", STOPPED),
    # Filters whose huge arguments are harmless render as usual.
    ("wordwrap-wide", "{{ 'x'|wordwrap(10**9) }}", OK),
    ("truncate-long", "{{ 'x'|truncate(10**9) }}", OK),
    ("batch-unfilled", "{{ [1, 2, 3]|batch(10**9)|list }}", OK),
    ("strftime-long", "{{ strftime_now('%Y' * 100000)|length }}", OK),
    # String methods.
    ("ljust", "{{ 'x'.ljust(10**9) }}", SIZE),
    ("rjust", "{{ 'x'.rjust(10**9) }}", SIZE),
    ("zfill", "{{ 'x'.zfill(10**9) }}", SIZE),
    ("str-center", "{{ 'x'.center(10**9) }}", SIZE),
    ("str-format-spec", "{{ '{:999999999}'.format('x') }}", SIZE),
    ("str-format-nested", "{{ '{0:{1}}'.format('x', 10**9) }}", SIZE),
    ("str-format-map", "{{ '{x:>999999999}'.format_map({'x': 1}) }}", SIZE),
    ("str-replace", "{{ ('x' * 1000000).replace('x', 'y' * 1000) }}", SIZE),
    ("str-join", "{{ ('y' * 10000).join(['a'] * 100000) }}", SIZE),
    ("expandtabs", "{{ ('\\t' * 1000000).expandtabs(1000) }}", SIZE),
    ("expandtabs-arg", "{{ 'x'.expandtabs(10**9) }}", SIZE),
    # Operators.
    ("repeat-string", "{{ 'a' * 10**10 }}", SIZE),
    ("repeat-list", "{{ [1] * 10**10 }}", SIZE),
    ("repeat-big-items", "{{ ['x' * 8000000] * 8000000 }}", SIZE),
    ("repeat-messages", "{{ messages * 10**9 }}", SIZE),
    ("repeat-content", "{{ messages[0].content * 10**7 }}", SIZE),
    ("raise-huge", "{{ raise_exception('x' * 10**9) }}", SIZE),
    ("power", "{{ 2 ** 1000000000000 }}", SIZE),
    ("power-grouped", "{{ 2 ** (10 ** 7) }}", SIZE),
    ("squaring-loop", "{% set ns = namespace(v=3) %}{% for i in range(40) %}{% set ns.v = ns.v * ns.v %}{% endfor %}",
     SIZE),
    ("percent-width", "{{ '%0999999999d' % 1 }}", SIZE),
    ("percent-star", "{{ '%*d' % (999999999, 1) }}", SIZE),
    ("percent-star-precision", "{{ '%.*f' % (999999999, 1.0) }}", SIZE),
    ("tilde", A8M + "{{ a ~ a ~ a }}", SIZE),
    ("tilde-many", A8M + "{{ " + " ~ ".join(["a"] * 1000) + " }}", SIZE),
    ("plus", "{% set a = 'x' * 4000000 %}{{ a + a + a }}", SIZE),
    ("doubling-tilde", "{% set ns = namespace(v='ab') %}{% for i in range(64) %}{% set ns.v = ns.v ~ ns.v %}"
     "{% endfor %}", SIZE),
    ("doubling-plus", "{% set ns = namespace(v='ab') %}{% for i in range(64) %}{% set ns.v = ns.v + ns.v %}"
     "{% endfor %}", SIZE),
    ("big-int-printed", "{{ 10 ** 100000 }}", r"^render failed at line 1: ValueError: Exceeds the limit"),
    ("bad-char", "{{ '%c' % 1114112 }}", r"^render failed at line 1: OverflowError"),
    # Output and blocks.
    ("output-loop", "{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", STOPPED),
    ("block-set", A8M + "{% set b %}{% for i in range(99999) %}{{ a }}{% endfor %}{% endset %}{{ b|length }}", SIZE),
    ("macro-body", "{% macro m() %}{{ 'x' * 8000000 }}{{ 'x' * 8000000 }}{% endmacro %}{{ m()|length }}", SIZE),
    ("print-list", A8M + "{{ [a, a, a] }}", SIZE),
    ("print-dict", A8M + "{{ {'k': [a, a]} }}", SIZE),
    ("fromkeys", A8M + "{{ dict.fromkeys(range(99999), a) }}", SIZE),
    ("big-range", "{{ range(10**9)|list }}", BIG_RANGE),
    # Containers that share one big string print it each time it is referenced.
    ("string-of-shared", "{{ dict.fromkeys(range(150), 'x' * 7000000)|string|length }}", SIZE),
    ("escape-of-shared", "{{ dict.fromkeys(range(150), 'x' * 7000000)|e|length }}", SIZE),
    ("format-of-shared", "{{ '{}'.format(dict.fromkeys(range(150), 'x' * 7000000))|length }}", SIZE),
    ("percent-of-shared", "{{ ('%s' % (dict.fromkeys(range(150), 'x' * 7000000),))|length }}", SIZE),
    ("percent-dict-of-shared", "{{ ('%(a)s%(b)s' % {'a': ['x' * 7000000] * 9, 'b': 1})|length }}", SIZE),
    # Time and recursion.
    ("nested-loops", "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", STOPPED),
    ("busy-loops", "{% for i in range(99999) %}{% for j in range(99999) %}{% if i == j %}{% endif %}{% endfor %}"
     "{% endfor %}", TIME),
    # Loops that call no hook and one slow library call: only the render process's kill stops them.
    ("loops-without-hooks", "{% set s = 'x' * 6000000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
     TIME),
    ("wordwrap-one", "{{ ('x ' * 3999999)|wordwrap(1)|length }}", TIME),
    ("macro-recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", RECURSION),
    ("macro-fork", "{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(1) }}", RECURSION),
    ("recursive-loop", "{% for x in range(10) recursive %}{{ loop(range(10)) }}{% endfor %}", RECURSION),
    # Compile time: deep nesting breaks Jinja's parser or Python's compiler.
    ("parentheses", "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}", NO_COMPILE),
    ("brackets", "{{ " + "[" * 300 + "1" + "]" * 300 + " }}", NO_COMPILE),
    ("nested-ifs", NESTED_IFS, NO_COMPILE),
    ("long-sum", "{{ 1" + " + 1" * 100000 + " }}", NO_COMPILE),
    ("unary-chain", "{{ " + "-" * 10000 + "1 }}", NO_COMPILE),
    ("syntax", "{% if %}", r"^template syntax error at line 1"),
    # Sandbox.
    ("mro", "{{ ''.__class__.__mro__ }}", REFUSED),
    ("globals", "{{ cycler.__init__.__globals__ }}", REFUSED),
]

# Run in the child: every template, one JSON line each, flushed, so a crash is pinned to the template after the
# last line. The child may use at most 4 GB of address space and 1 s per render. What each render cost is
# measured in CPU seconds of the child and of the render process it renders in, killed ones included (a loaded
# machine stretches wall time, not the work done).
_CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    import harness.template.render as render_module
    from harness.template import render_worker
    from harness.core.errors import TemplateError
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    render_module.MAX_RENDER_SECONDS = 1.0
    user = [{"role": "user", "content": "hi"}]

    def cpu():
        ticks = 0
        worker = render_worker._worker
        if worker is not None and worker.process.is_alive():
            with open(f"/proc/{worker.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])
        waited = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + waited.ru_utime + waited.ru_stime + ticks / os.sysconf("SC_CLK_TCK")

    for template in json.load(sys.stdin):
        started = cpu()
        try:
            out = {"kind": "ok", "length": len(render_module.render(template, user))}
        except TemplateError as exc:
            out = {"kind": "error", "message": str(exc)}
        except BaseException as exc:
            out = {"kind": "crash", "message": f"{type(exc).__name__}: {exc}"[:300]}
        out["cpu_seconds"] = cpu() - started
        print(json.dumps(out), flush=True)
""")


@pytest.fixture(scope="module")
def outcomes():
    templates = [template for _, template, _ in HOSTILE]
    child = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(templates), capture_output=True,
                           text=True, timeout=600)
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    died = {"kind": "crash", "message": f"the child died (exit {child.returncode}): {child.stderr[-300:]}"}
    return lines + [died] * (len(templates) - len(lines))


@pytest.mark.parametrize("index", range(len(HOSTILE)), ids=[name for name, _, _ in HOSTILE])
def test_hostile_template_ends_clearly_and_quickly(outcomes, index):
    _, _, expected = HOSTILE[index]
    outcome = outcomes[index]
    assert outcome["kind"] != "crash", outcome["message"]
    if expected is OK:
        assert outcome["kind"] == "ok" and outcome["length"] <= MAX_OUTPUT_CHARS, outcome
    else:
        assert outcome["kind"] == "error", outcome
        assert outcome["message"] == outcome["message"].strip() and len(outcome["message"]) < 400
        assert re.search(expected, outcome["message"]), outcome["message"]
    assert outcome["cpu_seconds"] < 10.0, outcome     # long-sum compiles for about 3 CPU s; a hang costs far more


def test_running_out_of_memory_below_the_budget_is_a_template_error():
    # Every value stays under the budget, but together they pass what the process may allocate.
    template = "{% set a = 'x' * 7000000 %}{{ [" + ", ".join(f"a ~ {i}" for i in range(60)) + "]|length }}"
    child = textwrap.dedent("""
        import resource, sys
        from harness.template.render import render
        from harness.core.errors import TemplateError
        size = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
        limit = (size << 10) + (200 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            render(sys.stdin.read(), [{"role": "user", "content": "hi"}])
        except TemplateError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", child], input=template, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("render stopped: out of memory"), out
