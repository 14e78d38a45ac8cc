"""DeepSeek V3.2: DSML calls in a `<｜DSML｜function_calls>` block (the markup is read in dsml.py)."""

from harness.formats.dsml import declare

FAMILY = declare("deepseek-v3.2", "function_calls", "DeepSeek V3.2", {"vllm": "deepseek_v32", "sglang": "deepseekv32"})
