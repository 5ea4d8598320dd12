"""Open a page in headless Chromium (Debian's ``chromium``) and report what a person
would meet: console errors and uncaught exceptions, requests for anything but the
page itself, how many plots drew, what a probe script found (after it clicked what a
person would click), and a screenshot.

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
it reads commands on fd 3 and writes replies and events on fd 4, each a JSON message
ending in a NUL byte), so nothing but the standard library and the browser is needed,
and no port is opened.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIMEOUT_S = 60
WIDTH = 1280
PLOTS = "document.querySelectorAll('.js-plotly-plot').length"  # figures plotly drew


def chromium() -> str | None:
    return shutil.which("chromium")


@dataclass
class PageVisit:
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions
    fetched: list[str] = field(default_factory=list)  # URLs requested besides the page
    plots: int = 0  # plotly figures drawn
    probed: Any = None  # the value of the probe script, when one was given


def visit(page: Path, screenshot: Path, height: int = 2400, probe: str | None = None
          ) -> PageVisit:
    """Load ``page``, wait for its load event, run the JavaScript expression ``probe`` in
    it (its JSON-serialisable value is kept; it may open and scroll the page), and save
    the ``height`` pixels then in view (``WIDTH`` wide) as a PNG at ``screenshot``."""
    commands_r, commands_w = os.pipe()
    replies_r, replies_w = os.pipe()
    # the browser's ends, numbered from 10 so that putting them at 3 and 4 moves nothing
    theirs = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_r, replies_w)]
    for fd in (commands_r, replies_w):
        os.close(fd)
    wiring = 'exec "$0" "$@" 3<&{0} 4>&{1} {0}<&- {1}>&-'.format(*theirs)
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            ["bash", "-c", wiring, chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "about:blank"],
            pass_fds=theirs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        for fd in theirs:
            os.close(fd)
        session = _Session(commands_w, replies_r)
        try:
            return session.visit(page, screenshot, height, probe)
        finally:
            _end(browser)
            os.close(commands_w)
            os.close(replies_r)


def _end(browser: subprocess.Popen) -> None:
    """Kill the browser and every process it started (its process group: renderers, the
    zygote), and wait until all are gone, so that none still writes into the profile
    folder while it is removed."""
    try:
        os.killpg(browser.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    browser.wait()
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(browser.pid, 0)  # anyone left in the group?
        except ProcessLookupError:
            return
        time.sleep(0.05)


class _Session:
    def __init__(self, commands: int, replies: int) -> None:
        self.commands, self.replies = commands, replies
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.deadline = time.monotonic() + TIMEOUT_S
        self.target: str | None = None

    def visit(self, page: Path, screenshot: Path, height: int, probe: str | None
              ) -> PageVisit:
        targets = self.call("Target.getTargets")["targetInfos"]
        tab = next(t["targetId"] for t in targets if t["type"] == "page")
        self.target = self.call("Target.attachToTarget", targetId=tab, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=page.resolve().as_uri())
        self.wait_for("Page.loadEventFired")
        plots = self.call("Runtime.evaluate", expression=PLOTS)["result"]["value"]
        probed = None
        if probe is not None:
            result = self.call("Runtime.evaluate", expression=probe, returnByValue=True)
            if "exceptionDetails" in result:
                raise RuntimeError(f"the probe failed: {result['exceptionDetails']}")
            probed = result["result"].get("value")
        shot = self.call("Page.captureScreenshot", format="png")
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return PageVisit(self.errors(), self.fetched(page), plots, probed)

    def errors(self) -> list[str]:
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append(details.get("exception", {}).get("description")
                             or details["text"])
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description", "")))
                                      for a in params["args"]))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(params["entry"]["text"])
        return found

    def fetched(self, page: Path) -> list[str]:
        own = page.resolve().as_uri()
        return [url for event in self.events if event["method"] == "Network.requestWillBeSent"
                if (url := event["params"]["request"]["url"]) != own
                and not url.startswith(("data:", "about:"))]

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.target is not None and not method.startswith("Target."):
            message["sessionId"] = self.target
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def wait_for(self, method: str) -> None:
        while not any(event["method"] == method for event in self.events):
            self.read()

    def read(self) -> dict[str, Any]:
        """The next message; events are kept in ``events``."""
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.replies], [], [], left)[0]:
                raise TimeoutError(f"chromium did not answer within {TIMEOUT_S} s")
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(raw)
        if "method" in message:
            self.events.append(message)
        return message
