"""DeepSeek V4: DSML calls in a `<｜DSML｜tool_calls>` block (the markup is read in dsml.py)."""

from harness.formats.dsml import declare

FAMILY = declare("deepseek-v4", "tool_calls", "DeepSeek V4 and V4 Flash", {"vllm": "deepseek_v4", "sglang": "deepseekv4"})
