"""The parsing engine the families are built from: the call types (calls.py), what a family is (base.py), the
deviation names, the JSON and markup scanners, the YAML pattern language (spec.py, pattern.py) and the call
shapes grammars are made from. Nothing here names a family: the families live in harness/families/, one file
each."""
