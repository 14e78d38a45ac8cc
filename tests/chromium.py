"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
ending in NUL, commands on fd 3, answers on fd 4), so tests can click and read a page with the standard
library alone (no websocket client)."""

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile

INSTALL = "apt-get install -y chromium"
# Without the background-networking flags Chromium reaches for update and sync servers, which a closed network
# refuses; a fresh profile keeps every run the same.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def executable() -> str | None:
    return shutil.which("chromium")


class Browser:
    def __init__(self, timeout: float = 60):
        self._profile = tempfile.TemporaryDirectory(prefix="harness-chromium-")
        to_browser, self._send = os.pipe()
        self._recv, from_browser = os.pipe()
        # The browser reads the protocol on fd 3 and writes on fd 4 exactly. Copies above 10 first, so moving
        # one end onto 3 cannot overwrite the other; dup2 clears close-on-exec on 3 and 4 and nothing else
        # is inheritable (PEP 446), hence close_fds=False, which would otherwise close them.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, from_browser)]

        def fds():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self._process = subprocess.Popen(
            [executable(), *FLAGS, f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe",
             "about:blank"],
            preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_browser, from_browser, *high):
            os.close(fd)
        self._buffer = b""
        self._id = 0
        self._events = []
        self.timeout = timeout
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            if not select.select([self._recv], [], [], self.timeout)[0]:
                raise TimeoutError(f"chromium sent nothing for {self.timeout} s")
            chunk = os.read(self._recv, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_for(self, event: str) -> dict:
        while True:
            for index, seen in enumerate(self._events):
                if seen.get("method") == event:
                    return self._events.pop(index)
            self._events.append(self._read())

    def open(self, url: str) -> None:
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self._process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._send)
        os.close(self._recv)
        self._profile.cleanup()
