#!/usr/bin/env bash
# Figures for docs/action.md: the action image's build time, size and cold start, with podman.
#
#   scripts/image-figures.sh [IMAGE_TAG]
#
# 1. builds the Dockerfile from scratch (--no-cache: what every job paid while action.yml
#    built the image) on the Debian base image of scripts/container-smoke.sh;
# 2. prints the image size (podman image inspect);
# 3. cold start, 3 times: from `podman run` of the ready image to the pipeline's first call,
#    on a one-case workspace whose python pipeline writes the time of its first call.
#
# Needs what container-smoke.sh needs (root, podman, runc, mmdebstrap; its base image is
# built on first use by that script). Prints one "figure: ..." line per measurement.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
IMAGE="${1:-localhost/ragproof-action:figures}"
SUITE="${RAGPROOF_SMOKE_SUITE:-bookworm}"
BASE_IMAGE="${RAGPROOF_SMOKE_BASE:-localhost/pybase:$SUITE}"
JOB="$(mktemp -d "${TMPDIR:-/tmp}/ragproof-figures.XXXXXX")"
trap 'rm -rf "$JOB"' EXIT

podman image exists "$BASE_IMAGE" || { echo "no $BASE_IMAGE: run scripts/container-smoke.sh once" >&2; exit 1; }
at_most() { if [ "$1" = unlimited ] || [ "$1" -gt "$2" ]; then echo "$2"; else echo "$1"; fi; }
nofile="$(at_most "$(ulimit -Hn)" 20000)"
nproc="$(at_most "$(ulimit -Hu)" 32768)"
printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n[engine]\nruntime = "runc"\n' \
    "$nofile" "$nofile" "$nproc" "$nproc" >"$JOB/containers.conf"
export CONTAINERS_CONF="$JOB/containers.conf"
ca_mounts=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    printf '[global]\ncert = /run/host-ca/ca.crt\n' >"$JOB/pip.conf"
    ca_mounts=(-v /etc/ssl/certs/ca-certificates.crt:/run/host-ca/ca.crt:ro -v "$JOB/pip.conf:/etc/pip.conf:ro")
fi

start=$(date +%s.%N)
podman build --quiet --no-cache --network host --build-arg BASE_IMAGE="$BASE_IMAGE" "${ca_mounts[@]}" \
    -t "$IMAGE" "$ROOT" >/dev/null
end=$(date +%s.%N)
seconds() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.2f}")' "$1" "$2"; }
echo "figure: build $(seconds "$start" "$end") s (podman build --no-cache)"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
printf 'figure: size %d MB (%s bytes)\n' "$((size / 1000000))" "$size"

mkdir -p "$JOB/ws"
cat >"$JOB/ws/first.py" <<'PY'
import os
import time


class Pipeline:
    def retrieve(self, question, k):
        if not os.path.exists("first-call"):
            with open("first-call", "w") as handle:
                handle.write(repr(time.time()))
        return [{"id": "c1", "text": "The warranty lasts 12 months."}]
PY
printf '{"id": "q1", "question": "How long is the warranty?", "expected_source_ids": ["c1"]}\n' >"$JOB/ws/cases.jsonl"
printf 'dataset: cases.jsonl\nadapter: {type: python, target: "first:Pipeline"}\nrun: {k: 1}\n' >"$JOB/ws/ragproof.yaml"
for attempt in 1 2 3; do
    rm -rf "$JOB/ws/first-call" "$JOB/ws/out" "$JOB/ws/.ragproof"
    start=$(date +%s.%N)
    podman run --rm --network none -v "$JOB/ws:/github/workspace" -w /github/workspace \
        --entrypoint ragproof "$IMAGE" run -c ragproof.yaml --out out --no-progress >/dev/null
    echo "figure: cold start $attempt: $(seconds "$start" "$(cat "$JOB/ws/first-call")") s (podman run -> first pipeline call)"
done
