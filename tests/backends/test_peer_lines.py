"""The peer workers' line protocol (harness/peers/lines.py), spoken by a real process as the workers are run: by
path, under a python that imports nothing from harness."""

import json
import subprocess
import sys
from pathlib import Path

import harness.peers

FOLDER = Path(harness.peers.__file__).parent

WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
from lines import serve

def handle(request):
    print("a library's notice on stdout")
    if request.get("op") == "fail":
        raise ValueError("no such thing")
    return {"echo": request.get("x")}

serve(handle)
"""


def test_every_line_gets_one_answer_with_its_id_and_nothing_a_library_prints_tears_one():
    lines = [json.dumps({"id": 1, "x": "é"}), "", "{not json", json.dumps({"id": 3, "op": "fail"}),
             json.dumps(["a", "list"]), json.dumps({"id": 5, "x": 2})]
    done = subprocess.run([sys.executable, "-I", "-c", WORKER, str(FOLDER)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers == [
        {"echo": "é", "id": 1},
        {"error": "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
         "id": None},
        {"error": "ValueError: no such thing", "id": 3},
        {"error": "AttributeError: 'list' object has no attribute 'get'", "id": None},
        {"echo": 2, "id": 5},
    ]
    assert done.stderr.count("a library's notice on stdout") == 4
