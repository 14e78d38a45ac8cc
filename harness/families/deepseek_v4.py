"""DeepSeek V4: DSML calls in a `<｜DSML｜tool_calls>` block (the markup is read in dsml.py)."""

from harness.families.base import Family
from harness.families.dsml import build_family


def build(foreign_markers) -> Family:
    return build_family("deepseek-v4", "tool_calls", "DeepSeek V4 and V4 Flash", foreign_markers)
