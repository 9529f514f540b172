"""Point action.yml's ``runs.image`` at a pushed image: ``pin-action-image.py ACTION_YML IMAGE``.

IMAGE must be ``docker://REGISTRY/NAME@sha256:<64 hex>``. Only the ``image:`` line under
``runs:`` changes, so the rest of the file (comments, order) stays as written. Used by
.github/workflows/release.yml.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PINNED = re.compile(r"^docker://[a-z0-9.-]+(?::[0-9]+)?/[a-z0-9._/-]+@sha256:[0-9a-f]{64}$")


def pin(text: str, image: str) -> str:
    if not PINNED.match(image):
        raise ValueError(f"expected docker://REGISTRY/NAME@sha256:<64 hex>, got {image!r}")
    new, count = re.subn(r"(?m)^(runs:\n(?:[ \t]+.*\n)*?[ \t]+image:[ \t]*).*$", lambda m: m[1] + image, text)
    if count != 1:
        raise ValueError("no runs.image line in the action file")
    return new


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: pin-action-image.py ACTION_YML docker://REGISTRY/NAME@sha256:DIGEST", file=sys.stderr)
        return 64
    path = Path(argv[1])
    try:
        path.write_text(pin(path.read_text(encoding="utf-8"), argv[2]), encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"pin-action-image: {path}: {exc}", file=sys.stderr)
        return 65
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
