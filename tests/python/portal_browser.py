"""A real browser for the portal's tests: Debian's Chromium, headless, driven
over the DevTools protocol (python3-websocket), with no other dependency.

    b = Browser.start()                       # fails when chromium is missing
    b.goto(f"{base}/#/runs")                  # waits until the page rendered
    b.wait("document.querySelectorAll('[data-testid=run-row]').length == 5")
    b.click("[data-testid=sort-step]")        # a real mouse click at its center
    b.screenshot("runs")                      # $RUNLENS_BUILD_DIR/portal-screenshots/runs.png
    assert b.errors == []                     # exceptions, console errors, failed requests
    b.close()                                 # stops chromium by its PID (process group)

One Chromium serves a whole test session (portal_fixtures.py); `errors` is
cleared for each test.
"""

import base64
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest
import websocket

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD_DIR = pathlib.Path(os.environ.get("RUNLENS_BUILD_DIR", "build"))
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPO / BUILD_DIR
SCREENSHOT_DIR = BUILD_DIR / "portal-screenshots"

# Keys for key(): DOM key -> (code, Windows virtual key code, text it types).
KEYS = {
    "Enter": ("Enter", 13, "\r"),
    "Tab": ("Tab", 9, None),
    "Escape": ("Escape", 27, None),
    " ": ("Space", 32, " "),
    "ArrowUp": ("ArrowUp", 38, None),
    "ArrowDown": ("ArrowDown", 40, None),
    "ArrowLeft": ("ArrowLeft", 37, None),
    "ArrowRight": ("ArrowRight", 39, None),
    "Home": ("Home", 36, None),
    "End": ("End", 35, None),
}


def chromium_binary():
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        pytest.fail("chromium is not installed (Debian package chromium; tools/dev test installs it)")
    return path


class BrowserError(AssertionError):
    pass


class Browser:
    """One headless Chromium and one page of it, over the DevTools protocol."""

    def __init__(self, proc, profile, ws, width, height):
        self.proc = proc
        self.profile = profile
        self.ws = ws
        self.width = width
        self.height = height
        self.next_id = 0
        self.errors = []  # strings: what went wrong in the page since clear_errors()
        self.console = []  # every console message, for debugging a failure

    # ---- start and stop ------------------------------------------------------

    @classmethod
    def start(cls, width=1400, height=900, timeout=20.0):
        profile = tempfile.mkdtemp(prefix="runlens-chromium-")
        args = [
            chromium_binary(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--metrics-recording-only",
            "--password-store=basic",
            "--use-mock-keychain",
            "--hide-scrollbars",
            "--mute-audio",
            "about:blank",
        ]
        log = open(os.path.join(profile, "chromium.log"), "w+")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            port = cls._devtools_port(proc, profile, log, timeout)
            ws_url = cls._page_target(port, timeout)
            ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
            b = cls(proc, profile, ws, width, height)
            for domain in ("Runtime", "Log", "Page", "Network"):
                b.send(f"{domain}.enable")
            b.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
            return b
        except BaseException:
            cls._kill(proc)
            shutil.rmtree(profile, ignore_errors=True)
            raise

    @staticmethod
    def _devtools_port(proc, profile, log, timeout):
        path = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                raise BrowserError(f"chromium exited with {proc.returncode}:\n{log.read()[-4000:]}")
            try:
                with open(path) as f:
                    first = f.readline().strip()
                if first:
                    return int(first)
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.05)
        log.seek(0)
        raise BrowserError(f"chromium wrote no {path} in {timeout} s:\n{log.read()[-4000:]}")

    @staticmethod
    def _page_target(port, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    targets = json.load(r)
                pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium on port {port} shows no page target")
            time.sleep(0.05)

    @staticmethod
    def _kill(proc):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        self._kill(self.proc)
        shutil.rmtree(self.profile, ignore_errors=True)

    # ---- the protocol --------------------------------------------------------

    def send(self, method, timeout=30.0, **params):
        """Sends one command and returns its result; events met meanwhile are handled."""
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                raise BrowserError(f"no answer to {method} in {timeout} s")
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error'].get('message')} {msg['error'].get('data', '')}")
                return msg.get("result", {})
            if "method" in msg:
                self._event(msg["method"], msg.get("params", {}))

    def drain(self, quiet=0.1):
        """Handles the events already sent (until `quiet` seconds pass with none)."""
        self.ws.settimeout(quiet)
        while True:
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                return
            if "method" in msg:
                self._event(msg["method"], msg.get("params", {}))

    def _event(self, method, p):
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            exc = d.get("exception", {})
            text = exc.get("description") or d.get("text", "exception")
            self.errors.append(f"exception: {text} ({d.get('url', '')}:{d.get('lineNumber', 0) + 1}:{d.get('columnNumber', 0) + 1})")
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.console.append(f"console.{p.get('type')}: {text}")
            if p.get("type") in ("error", "assert"):
                self.errors.append(f"console.{p.get('type')}: {text}")
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            self.console.append(f"log {e.get('level')}: {e.get('text')} {e.get('url', '')}")
            if e.get("level") == "error":
                self.errors.append(f"log: {e.get('text')} {e.get('url', '')}".strip())
        elif method == "Network.responseReceived":
            r = p.get("response", {})
            if r.get("status", 0) >= 400:
                self.errors.append(f"request failed: HTTP {r.get('status')} {r.get('url')}")
        elif method == "Network.loadingFailed":
            if not p.get("canceled"):
                self.errors.append(f"request failed: {p.get('errorText')} ({p.get('type', '')})")

    def clear_errors(self):
        self.drain(0.02)
        self.errors = []
        self.console = []

    # ---- what tests use ------------------------------------------------------

    def eval(self, js, timeout=30.0):
        """The value of a JavaScript expression (promises awaited), by value."""
        r = self.send("Runtime.evaluate", timeout=timeout, expression=js, returnByValue=True, awaitPromise=True, userGesture=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            desc = d.get("exception", {}).get("description") or d.get("text")
            raise BrowserError(f"{js!r} threw: {desc}")
        return r.get("result", {}).get("value")

    def text(self, selector="body"):
        return self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); return e ? e.innerText : null; }})()")

    def wait(self, js, timeout=10.0):
        """Polls `js` until it is truthy and returns its value; fails with the
        expression, the page's text and its errors."""
        deadline = time.monotonic() + timeout
        last_error = None
        # An element is truthy (by value it would be {}).
        probe = f"(() => {{ const v = ({js}); return v instanceof Node ? true : v; }})()"
        while True:
            try:
                v = self.eval(probe)
                if v:
                    return v
            except BrowserError as e:
                last_error = e
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        body = self.eval("document.body ? document.body.innerText : ''") or ""
        url = self.eval("location.href")
        raise BrowserError(
            f"timed out after {timeout} s waiting for {js}\n"
            + (f"last error: {last_error}\n" if last_error else "")
            + f"url: {url}\nerrors: {self.errors}\npage text:\n{body[:3000]}"
        )

    def goto(self, url, timeout=15.0):
        """Opens `url` and waits until the portal rendered its page (body
        data-state ready or error); a change of the hash alone counts too."""
        try:
            here = self.eval("document.body && (document.body.dataset.state = 'navigating'), location.href")
        except BrowserError:
            here = None
        if here == url:  # the same URL: navigating would change nothing
            self.send("Page.reload", ignoreCache=True)
        else:
            r = self.send("Page.navigate", url=url)
            if r.get("errorText"):
                raise BrowserError(f"cannot open {url}: {r['errorText']}")
        self.wait_ready(timeout)

    def blank(self):
        """Leaves the page (about:blank): no more polling of a server a test stops."""
        self.send("Page.navigate", url="about:blank")
        self.wait("location.href === 'about:blank' && document.readyState === 'complete'")

    def wait_ready(self, timeout=15.0):
        """Waits until the portal rendered the page of the current hash (or
        failed: data-state error); the app says which hash in data-hash."""
        return self.wait(
            "document.readyState === 'complete' && document.body && "
            "document.body.dataset.hash === location.hash && "
            "['ready', 'error'].includes(document.body.dataset.state) && document.body.dataset.state",
            timeout,
        )

    def _center(self, selector):
        box = self.eval(
            f"""(() => {{
              const e = document.querySelector({json.dumps(selector)});
              if (!e) return null;
              e.scrollIntoView({{block: 'center', inline: 'center'}});
              const r = e.getBoundingClientRect();
              return {{x: r.left, y: r.top, w: r.width, h: r.height}};
            }})()"""
        )
        if box is None:
            raise BrowserError(f"no element matches {selector}\npage text:\n{(self.text() or '')[:2000]}")
        if box["w"] <= 0 or box["h"] <= 0:
            raise BrowserError(f"{selector} is not visible (size {box['w']}x{box['h']})")
        return box

    def _mouse(self, kind, x, y, buttons=0, **extra):
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, buttons=buttons, **extra)

    def click(self, selector):
        """A real mouse click (pressed and released) at the element's center."""
        b = self._center(selector)
        x, y = b["x"] + b["w"] / 2, b["y"] + b["h"] / 2
        self._mouse("mouseMoved", x, y)
        self._mouse("mousePressed", x, y, buttons=1, button="left", clickCount=1)
        self._mouse("mouseReleased", x, y, buttons=0, button="left", clickCount=1)

    def drag(self, selector, start, end, steps=8):
        """A mouse drag inside the element, from and to fractions of its box:
        drag(sel, (0.2, 0.5), (0.6, 0.5))."""
        b = self._center(selector)
        x0, y0 = b["x"] + b["w"] * start[0], b["y"] + b["h"] * start[1]
        x1, y1 = b["x"] + b["w"] * end[0], b["y"] + b["h"] * end[1]
        self._mouse("mouseMoved", x0, y0)
        self._mouse("mousePressed", x0, y0, buttons=1, button="left", clickCount=1)
        for i in range(1, steps + 1):
            t = i / steps
            self._mouse("mouseMoved", x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, buttons=1, button="left")
        self._mouse("mouseReleased", x1, y1, buttons=0, button="left", clickCount=1)

    def hover(self, selector, at=(0.5, 0.5)):
        b = self._center(selector)
        self._mouse("mouseMoved", b["x"] + b["w"] * at[0], b["y"] + b["h"] * at[1])

    def focus(self, selector):
        ok = self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return false; e.focus(); return document.activeElement === e; }})()")
        if not ok:
            raise BrowserError(f"cannot focus {selector}")

    def key(self, selector, key):
        """Focuses the element (None: whatever has focus) and presses one key
        (Enter, Tab, Escape, ' ', arrows, or a printable character)."""
        if selector is not None:
            self.focus(selector)
        code, vk, text = KEYS.get(key, (None, None, None))
        if code is None:
            if len(key) != 1:
                raise BrowserError(f"key() does not know {key!r}")
            code, vk, text = f"Key{key.upper()}" if key.isalpha() else "", ord(key.upper()), key
        down = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}
        if text:
            down["text"] = text
            down["unmodifiedText"] = text
        self.send("Input.dispatchKeyEvent", **down)
        self.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk, nativeVirtualKeyCode=vk)

    def type(self, selector, text):
        """Focuses the element and types `text` into it (as an input method would)."""
        self.focus(selector)
        self.send("Input.insertText", text=text)

    def screenshot(self, name):
        """Saves the whole page as $RUNLENS_BUILD_DIR/portal-screenshots/NAME.png; returns the path."""
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        m = self.send("Page.getLayoutMetrics")
        size = m.get("cssContentSize") or m.get("contentSize")
        clip = {"x": 0, "y": 0, "width": max(self.width, size["width"]), "height": min(max(self.height, size["height"]), 8000), "scale": 1}
        r = self.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        path = SCREENSHOT_DIR / f"{name}.png"
        path.write_bytes(base64.b64decode(r["data"]))
        return path

    def count(self, selector):
        return self.eval(f"document.querySelectorAll({json.dumps(selector)}).length")

    def attr(self, selector, name):
        return self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); return e ? e.getAttribute({json.dumps(name)}) : null; }})()")

    def hash(self):
        return self.eval("location.hash")
