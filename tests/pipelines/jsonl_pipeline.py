"""A pipeline process for the command adapter (JSON lines on stdin/stdout), scripted by question.

The first word of the question picks the behaviour: ``ok``; ``slow`` (replies after 0.3 s,
so later requests overtake it); ``error`` (an error reply); ``crashonce`` (exits the first
time, using a marker file in $MARKER_DIR); ``crash`` (exits every time); ``env`` (answers
with the environment as JSON); ``noise`` (writes a non-JSON line first); ``big`` (a 2 MB
line). Requests are handled on threads, so replies come back in any order.
"""

import json
import os
import sys
import threading
import time

lock = threading.Lock()


def reply(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def handle(request):
    question = request["question"]
    behaviour = question.split(":", 1)[0] if ":" in question else "ok"
    print(f"handling {request['id']} {request['method']}", file=sys.stderr, flush=True)
    if behaviour == "slow":
        time.sleep(0.3)
    if behaviour == "crash" or behaviour == "crashonce" and request["method"] == "answer":
        marker = os.path.join(os.environ.get("MARKER_DIR", "."), "crashed-once")
        if behaviour == "crash" or not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)
    if behaviour == "error":
        reply({"id": request["id"], "error": "index unavailable"})
        return
    if behaviour == "noise":
        with lock:
            sys.stdout.write("loading model weights...\n")
            sys.stdout.flush()
    if request["method"] == "retrieve":
        result = [{"id": f"doc-{i}", "text": question} for i in range(1, request["k"] + 1)]
    elif behaviour == "env":
        result = {"text": json.dumps(dict(os.environ))}
    elif behaviour == "big":
        result = {"text": "x" * 2_000_000}
    else:
        result = {"text": f"answer: {question}", "citations": ["doc-1"]}
    reply({"id": request["id"], "result": result})


for line in sys.stdin:
    if line.strip():
        threading.Thread(target=handle, args=(json.loads(line),), daemon=True).start()
