"""DeepSeek V3.2: DSML calls in a `<｜DSML｜function_calls>` block (the markup is read in dsml.py)."""

from harness.families.base import Family
from harness.families.dsml import build_family


def build(foreign_markers) -> Family:
    return build_family("deepseek-v3.2", "function_calls", "DeepSeek V3.2", foreign_markers)
