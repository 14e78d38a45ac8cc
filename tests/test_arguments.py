from harness.arguments import tool_parameters, type_arguments

TOOL = {
    "type": "function",
    "function": {
        "name": "file_chunks",
        "parameters": {
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "start": {"type": "integer"},
                "end": {"type": "integer"},
                "mode": {"type": "string", "enum": ["text", "code"]},
                "ratio": {"type": "number"},
                "flags": {"type": "array"},
            },
            "required": ["source", "start"],
        },
    },
}
PARAMS = tool_parameters(TOOL)


def test_strings_for_non_string_parameters_are_read_as_json():
    # Live, Llama 3.2 1B wrote "start": "0" (seed ADR).
    typed = type_arguments({"source": "imprint/chat.py", "start": "0", "end": "2"}, PARAMS)
    assert typed.ok and typed.arguments == {"source": "imprint/chat.py", "start": 0, "end": 2}
    assert typed.coerced == ["start", "end"]


def test_a_string_parameter_keeps_a_numeric_looking_string():
    typed = type_arguments({"source": "42", "start": 1}, PARAMS)
    assert typed.ok and typed.arguments["source"] == "42" and typed.coerced == []


def test_wrong_type_missing_and_unknown_are_errors_the_model_can_read():
    typed = type_arguments({"start": "zero", "project": "chat", "mode": "prose"}, PARAMS)
    assert not typed.ok
    message = typed.error_message()
    assert "parameter 'start' must be integer" in message
    assert "unknown parameter 'project'" in message
    assert "parameter 'mode' must be one of ['text', 'code']" in message
    assert "missing required parameter 'source'" in message


def test_booleans_are_not_integers_and_integral_floats_are():
    assert not type_arguments({"source": "a", "start": True}, PARAMS).ok
    typed = type_arguments({"source": "a", "start": 2.0, "ratio": "0.5", "flags": "[1, 2]"}, PARAMS)
    assert typed.ok and typed.arguments["ratio"] == 0.5 and typed.arguments["flags"] == [1, 2]
