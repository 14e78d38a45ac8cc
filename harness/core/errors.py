"""Exception types. Every error a user can meet carries enough context to act on it."""


class HarnessError(Exception):
    """Base class for errors the command line reports without a traceback."""


class TemplateError(HarnessError):
    """A chat template failed to compile or render (including its own raise_exception)."""


class TemplateRaisedError(TemplateError):
    """The template itself rejected its input with raise_exception (e.g. roles that do not alternate).

    `template_message` is the template's own message, unchanged."""

    def __init__(self, message: str, template_message: str | None = None):
        super().__init__(message)
        self.template_message = message if template_message is None else template_message


class SourcesError(HarnessError):
    """sources.json is malformed, or names something that is not there."""


class DriftError(HarnessError):
    """A pinned file on disk does not match its size or SHA-256 in sources.json."""


class DownloadError(HarnessError):
    """A download failed, was cut short, or delivered bytes that do not match the pin."""


class FamilySpecError(HarnessError):
    """A family YAML file is invalid; the message names the file, line and field."""


class ScenarioError(HarnessError):
    """A scenario YAML file is invalid; the message names the file, line and field."""


class ModelLoadError(HarnessError):
    """A GGUF model file is missing or llama.cpp could not load it."""


class GenerationError(HarnessError):
    """Generation could not start or continue: empty or over-long prompt, bad grammar, bad sampling values,
    or llama.cpp failing to decode."""


class GrammarError(HarnessError):
    """A tool-call grammar cannot be built: no tools, a tool without an identifier name, an unknown family or
    tool_choice."""


class GrammarRuntimeError(HarnessError):
    """Grammar-constrained sampling failed inside the runtime (llama.cpp has called a null function pointer
    under GPU offload), as opposed to a grammar that does not parse. The tool loop retries that step once without the
    grammar and records that it did."""


class ServerStartError(HarnessError):
    """A local server could not be found, started or made ready; the message quotes its log."""


class ServerExitedError(ServerStartError):
    """A local server's process ended before it was ready, of its own accord (not a port another process took):
    the runtime refused what it was given (a model of an architecture it lacks, a flag it does not know); the
    message quotes its last words."""


class DequantizeError(HarnessError):
    """transformers could not turn a pinned GGUF into an HF folder (an architecture it cannot dequantize); the
    message is its words (harness.live.dequantized)."""


class ServerReplyError(GenerationError):
    """A server answered a request with an error, or not at all; `retry` says whether asking again may help;
    `expired`: no complete answer came by the request's deadline."""

    def __init__(self, message: str, retry: bool, status: int | None = None, expired: bool = False):
        super().__init__(message)
        self.retry, self.status, self.expired = retry, status, expired


class MissingExtraError(HarnessError):
    """An optional dependency (one of the package's extras) is not installed; the message names the extra and the
    command that installs it."""

    def __init__(self, package: str, extra: str, needed_for: str):
        super().__init__(f"{package} is not installed: {needed_for} needs harness's `{extra}` extra. Install it with "
                         f"`pip install -e '.[{extra}]'` in the checkout (`bash scripts/setup.sh` does)")
        self.package, self.extra = package, extra


class MissingEnvironmentError(HarnessError):
    """A runtime that runs in an environment of its own, built apart from the main venv by one script, is not built
    here; the message names the script. Not a ServerStartError: a run stops on it instead of recording every
    request as the runtime's error."""


class UnsafeWriteError(HarnessError):
    """A write that would leave its folder, go through a link, or land in something that is not a file."""


class ToolSchemaError(HarnessError, ValueError):
    """A tool definition that cannot be used, with where and why. A ValueError too: a tool list is a value given
    to check_tools, and callers reading tools among other values catch the one kind."""


class RecordError(HarnessError, ValueError):
    """A record lacks a field its kind declares, or has it with the wrong type. A ValueError too, as json's own
    errors on the same line are: a reader catches both in one clause."""


class TranscriptError(HarnessError):
    """A transcript cannot be read or written."""


class TranscriptBusyError(TranscriptError):
    """Another process holds the transcript's lock (a run already writing it)."""


class RenderLimitError(TemplateError):
    """A render went past its time, size or memory budget: the template, not its input, is at fault, and
    asking again with other input is not worth the wait."""


class BFCLDataError(HarnessError):
    """BFCL's data is not what this code reads (a file missing, an entry without its fields)."""


class BFCLCheckerError(HarnessError):
    """The checker environment is missing, is not the pinned BFCL, or the worker broke its protocol."""


class PeerError(HarnessError, RuntimeError):
    """The peers worker died or answered out of protocol. A RuntimeError too, as it was before it was a
    HarnessError: a caller that caught the worker's failure as one still does."""


class HFWorkerError(HarnessError, RuntimeError):
    """The HF worker (transformers in the vLLM environment) died or answered out of protocol. A RuntimeError
    too, as PeerError is."""


class ReadmeFiguresError(HarnessError):
    """The results folder does not hold what README's findings quote, or no longer supports what they say."""
