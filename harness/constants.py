"""Environment settings, read once at import time."""

import os
from pathlib import Path

# The project tree holds templates/, sources.json, scenarios/ and results/. Installed elsewhere, point
# HARNESS_ROOT at a checkout.
ROOT = Path(os.environ.get("HARNESS_ROOT", Path(__file__).resolve().parent.parent))
SOURCES_PATH = ROOT / "sources.json"
TEMPLATES_DIR = ROOT / "templates"
SCENARIOS_DIR = ROOT / "scenarios"
RESULTS_DIR = ROOT / "results"

HF_ENDPOINT = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
HF_HUB_OFFLINE = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
