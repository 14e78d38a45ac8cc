"""The template variables a live run passes beside the conversation: the policy in one place, recorded per
sample as `template_kwargs`."""

from harness.template.render import template_variables


def template_kwargs_for(template: str) -> dict:
    """Templates that think by default (Qwen3, Granite, LFM2.5, Ling) are asked not to, where they take the
    switch, so the reply reaches the parser without a reasoning block: a small model's token budget goes to the
    call or the answer, and the scenarios' token limits hold."""
    return {"enable_thinking": False} if "enable_thinking" in template_variables(template) else {}
