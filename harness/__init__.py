"""harness: conformance and evaluation of the tool-call formats of local language models."""

__version__ = "0.1.0"
