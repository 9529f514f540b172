#!/usr/bin/env bash
# Build the action's image with podman and run it the way the GitHub runner runs a Docker
# container action, against the GitHub REST API test server (tests/servers/github_server.py)
# on this machine:
#
#   1. a base image from Debian's packages (mmdebstrap | podman import), reused when present;
#   2. `podman build` of the Dockerfile on that base (the layer cache makes warm builds fast);
#   3. a push to the default branch inside the container: the baseline run, no API calls;
#   4. the API test server with a pull request whose baseline artifact is that run;
#   5. a pull_request event inside the container: it must leave one sticky comment and a
#      successful check run on the pull request's head commit, and set the step outputs;
#   6. the hostile pipeline (tests/pipelines/hostile.py) as a python, a command and an
#      http-served pipeline, each with a hostile `install` command, with secrets of every kind
#      in the container's environment: nothing it could read or write holds a secret, no
#      file-command file changes but by ragproof, and no command it printed is obeyed;
#   7. the pull request that commits `.ragproof -> /opt/pipeline` (a directory uid 64000 owns in
#      the image) with an install command that leaves a daemon (double fork + setsid) to swap
#      the staging directory and plant links to a ragproof module and GITHUB_ENV: refused before
#      any untrusted code runs; and with the workspace's own directory, the daemon is ended
#      before the run is written (it never sees the finished run).
#
# Needs root, podman, runc and mmdebstrap (apt-get install -y podman buildah runc mmdebstrap).
# Settings (environment): RAGPROOF_SMOKE_DIR (work directory; each run uses a fresh job
# directory inside it, removed at the end), RAGPROOF_SMOKE_SUITE (Debian suite of the base
# image; default the host's own, else bookworm), RAGPROOF_SMOKE_BASE (base image name),
# RAGPROOF_SMOKE_IMAGE (image name), PYTHON.
# Prints "container smoke: ok" and exits 0 on success.
set -euo pipefail
# The runner creates the file-command files and the workspace under its own umask (022): so do we,
# whatever the caller's (under umask 000 every file here would be writable by the sandbox user).
umask 022

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${RAGPROOF_SMOKE_DIR:-${TMPDIR:-/tmp}/ragproof-container-smoke}"
host_suite() { # VERSION_CODENAME of a Debian host, else bookworm
    (. /etc/os-release 2>/dev/null && [ "${ID:-}" = debian ] && [ -n "${VERSION_CODENAME:-}" ] \
        && echo "$VERSION_CODENAME") || echo bookworm
}
SUITE="${RAGPROOF_SMOKE_SUITE:-$(host_suite)}"
BASE_IMAGE="${RAGPROOF_SMOKE_BASE:-localhost/pybase:$SUITE}"
IMAGE="${RAGPROOF_SMOKE_IMAGE:-localhost/ragproof-action:smoke}"
PYTHON="${PYTHON:-python3}"
MAIN_SHA="c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"

log() { printf 'container smoke: %s\n' "$*"; }
die() { printf 'container smoke: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (podman builds and runs the image as root here)"
for tool in podman runc mmdebstrap "$PYTHON"; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install -y podman buildah runc mmdebstrap)"
done

mkdir -p "$WORK"
# Each invocation has a job directory of its own (runs may overlap); images are shared.
JOB="$(mktemp -d "$WORK/job.XXXXXX")"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$JOB"
}
trap cleanup EXIT

# crun cannot run here ("cgroups in hybrid mode not supported") and podman's default open-file
# limit exceeds the machine's hard limit: a containers.conf of our own, no edit under /etc,
# with limits no higher than this machine's.
at_most() { # LIMIT CAP: the smaller of a `ulimit -H` value and CAP
    if [ "$1" = unlimited ] || [ "$1" -gt "$2" ]; then echo "$2"; else echo "$1"; fi
}
nofile="$(at_most "$(ulimit -Hn)" 20000)"
nproc="$(at_most "$(ulimit -Hu)" 32768)"
cat >"$JOB/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$JOB/containers.conf"

debian_mirror() { # SUITE: the Debian archive the machine's own apt sources name for it
    "$PYTHON" - "$1" <<'PY'
import glob
import re
import sys

suite = sys.argv[1]

def entries():
    # The files apt itself reads (not *.disabled, *.save, ...).
    listed = glob.glob("/etc/apt/sources.list.d/*.list") + glob.glob("/etc/apt/sources.list.d/*.sources")
    for path in ["/etc/apt/sources.list", *sorted(listed)]:
        try:
            text = open(path, encoding="utf-8").read()
        except OSError:
            continue
        for line in text.splitlines():  # one-line format: deb [options] URI suite components
            m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m:
                yield m[1], [m[2]]
        for stanza in re.split(r"\n\s*\n", text):  # deb822 format
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.M))
            if "deb" in fields.get("Types", "").split() and "URIs" in fields:
                for uri in fields["URIs"].split():
                    yield uri, fields.get("Suites", "").split()

for uri, suites in entries():
    if suite in suites and "security" not in uri:
        print(uri)
        break
else:
    print("http://deb.debian.org/debian")
PY
}

if podman image exists "$BASE_IMAGE"; then
    log "reusing base image $BASE_IMAGE"
else
    mirror="$(debian_mirror "$SUITE")"
    log "building base image $BASE_IMAGE ($SUITE) from $mirror"
    mmdebstrap --quiet --variant=apt --include=python3,python3-venv,python3-pip,ca-certificates \
        "$SUITE" - "$mirror" | podman import --quiet - "$BASE_IMAGE" >/dev/null
fi

# Outbound HTTPS is re-signed by a proxy whose CA is only in the host's store: pip inside the
# build is pointed at the host bundle through mounts, without changing the Dockerfile.
HOST_CA=/etc/ssl/certs/ca-certificates.crt
ca_mounts=()
if [ -f "$HOST_CA" ]; then
    printf '[global]\ncert = /run/host-ca/ca.crt\n' >"$JOB/pip.conf"
    ca_mounts=(-v "$HOST_CA:/run/host-ca/ca.crt:ro" -v "$JOB/pip.conf:/etc/pip.conf:ro")
fi
log "building $IMAGE"
previous="$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
podman build --quiet --network host --build-arg BASE_IMAGE="$BASE_IMAGE" "${ca_mounts[@]}" \
    -t "$IMAGE" "$ROOT" >/dev/null
# The image this script tagged before, now untagged: drop it (kept while another run uses it).
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
fi

# The runner's layout: workspace at /github/workspace, the event under /github/workflow,
# the output and summary files under /github/file_commands.
fresh_job() {
    rm -rf "$JOB/workspace" "$JOB/workflow" "$JOB/file_commands"
    mkdir -p "$JOB/workflow" "$JOB/file_commands"
    cp -r "$ROOT/tests/fixtures/action_project" "$JOB/workspace"
    rm -f "$JOB/workspace/seen-env.json"
    : >"$JOB/file_commands/set_output"
    : >"$JOB/file_commands/step_summary"
}

run_action() { # EVENT_NAME SHA REF API_URL TOKEN
    podman run --rm --network host \
        -v "$JOB/workspace:/github/workspace" -w /github/workspace \
        -v "$JOB/workflow:/github/workflow" \
        -v "$JOB/file_commands:/github/file_commands" \
        -e CI=true -e GITHUB_ACTIONS=true \
        -e GITHUB_EVENT_NAME="$1" -e GITHUB_EVENT_PATH=/github/workflow/event.json \
        -e GITHUB_SHA="$2" -e GITHUB_REF="$3" \
        -e GITHUB_REPOSITORY=acme/rag -e GITHUB_REPOSITORY_OWNER=acme \
        -e GITHUB_API_URL="$4" -e GITHUB_SERVER_URL=https://github.example \
        -e GITHUB_RUN_ID=4242 -e GITHUB_RUN_ATTEMPT=1 \
        -e GITHUB_WORKFLOW_REF="acme/rag/.github/workflows/pr-gate.yml@$3" \
        -e GITHUB_WORKSPACE=/github/workspace \
        -e GITHUB_OUTPUT=/github/file_commands/set_output \
        -e GITHUB_STEP_SUMMARY=/github/file_commands/step_summary \
        -e "INPUT_GITHUB-TOKEN=$5" -e INPUT_CONFIG=ragproof.yaml -e INPUT_MODE=auto \
        -e INPUT_OUT=.ragproof/run -e INPUT_COMMENT=true -e INPUT_CHECK-NAME=ragproof \
        -e INPUT_BASELINE-ARTIFACT=ragproof-run \
        "$IMAGE"
}

# A push to main, run by the image in mode run as the runner runs the action: DIR holds
# workspace/, workflow/ and file_commands/; the exit code, stdout and stderr go to DIR/exit,
# DIR/stdout and DIR/stderr. Further arguments (volumes, -e NAME=VALUE) go to podman.
push_run() { # DIR RUN_ID INSTALL [PODMAN_ARG...]
    local dir="$1" run_id="$2" install="$3"
    shift 3
    printf '%s\n' "{\"ref\": \"refs/heads/main\", \"after\": \"$MAIN_SHA\", \"repository\": {\"id\": 1001, \"full_name\": \"acme/rag\", \"default_branch\": \"main\"}}" \
        >"$dir/workflow/event.json"
    for f in set_env set_output add_path save_state step_summary; do : >"$dir/file_commands/$f"; done
    set +e
    podman run --rm --network host \
        -v "$dir/workspace:/github/workspace" -w /github/workspace \
        -v "$dir/workflow:/github/workflow" \
        -v "$dir/file_commands:/github/file_commands" \
        -e CI=true -e GITHUB_ACTIONS=true \
        -e GITHUB_EVENT_NAME=push -e GITHUB_EVENT_PATH=/github/workflow/event.json \
        -e GITHUB_SHA="$MAIN_SHA" -e GITHUB_REF=refs/heads/main \
        -e GITHUB_REPOSITORY=acme/rag -e GITHUB_API_URL=http://127.0.0.1:9 \
        -e GITHUB_SERVER_URL=https://github.example -e GITHUB_RUN_ID="$run_id" \
        -e GITHUB_WORKSPACE=/github/workspace \
        -e GITHUB_ENV=/github/file_commands/set_env -e GITHUB_OUTPUT=/github/file_commands/set_output \
        -e GITHUB_PATH=/github/file_commands/add_path -e GITHUB_STATE=/github/file_commands/save_state \
        -e GITHUB_STEP_SUMMARY=/github/file_commands/step_summary \
        -e INPUT_CONFIG=ragproof.yaml -e INPUT_MODE=run -e INPUT_OUT=.ragproof/run \
        -e "INPUT_INSTALL=$install" "$@" \
        "$IMAGE" >"$dir/stdout" 2>"$dir/stderr"
    echo $? >"$dir/exit"
    set -e
}

# The hostile pipeline, run the way the runner runs the action, with default capabilities.
SECRET_NAMES=(INPUT_GITHUB-TOKEN GITHUB_TOKEN ACTIONS_RUNTIME_TOKEN ACTIONS_ID_TOKEN_REQUEST_TOKEN
    ACTIONS_ID_TOKEN_REQUEST_URL ACTIONS_CACHE_URL ACTIONS_RESULTS_URL OPENAI_API_KEY DEPLOY_PASSWORD)
hostile_run() { # KIND ADAPTER_YAML INSTALL
    local kind="$1" dir="$JOB/hostile-$1"
    rm -rf "$dir"
    mkdir -p "$dir/workspace" "$dir/workflow" "$dir/file_commands"
    cp "$ROOT/tests/pipelines/hostile.py" "$dir/workspace/"
    printf '%s\n' '{"file_commands": "/github/file_commands", "scan": ["/github/file_commands", "/github/workflow", "/github/home"]}' \
        >"$dir/workspace/hostile.json"
    printf '%s\n' '{"id": "case-1", "question": "fact 1?", "expected_source_ids": ["doc-1"]}' \
        '{"id": "case-2", "question": "fact 2?", "expected_source_ids": ["doc-1"]}' >"$dir/workspace/cases.jsonl"
    printf 'version: 1\ndataset: cases.jsonl\nadapter:\n%s  timeout_s: 120\n  concurrency: 1\n  retries: 0\nrun:\n  k: 1\n  metrics: [retrieval.hit_rate_at_k]\n' \
        "$2" >"$dir/workspace/ragproof.yaml"
    local secret_args=() name
    : >"$dir/secrets"
    for name in "${SECRET_NAMES[@]}"; do
        value="RPSECRET-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
        secret_args+=(-e "$name=$value")
        printf '%s=%s\n' "$name" "$value" >>"$dir/secrets"
    done
    push_run "$dir" 4243 "$3" "${secret_args[@]}"
    "$PYTHON" - "$dir" "$kind" "$ROOT/tests" <<'PY'
import json
import sys
from pathlib import Path

directory, kind, tests = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
sys.path.insert(0, tests)
from log_commands import obeyed_commands  # noqa: E402

stdout = (directory / "stdout").read_text()
stderr = (directory / "stderr").read_text()
code = int((directory / "exit").read_text())
assert code == 0, f"{kind}: exit {code}\n{stdout[-2000:]}\n{stderr[-2000:]}"
secrets = dict(line.split("=", 1) for line in (directory / "secrets").read_text().splitlines())
findings = [
    json.loads(line.split("HOSTILE-FINDINGS ", 1)[1]) for line in stdout.splitlines() if "HOSTILE-FINDINGS " in line
]
assert findings, f"{kind}: the install command reported nothing"
rows = (directory / "workspace/.ragproof/run/rows.jsonl").read_text().splitlines()
for row in map(json.loads, rows):
    assert row["status"] == "ok", row
    for text in [row["answer"]["text"], *(c["text"] for c in row["retrieved"])]:
        findings.append(json.loads(text.removeprefix("HOSTILE-FINDINGS ")))
for found in findings:
    assert found["secrets"] == [], (kind, found)
    assert found["written"] == [], (kind, found)
    assert not {"/proc/1/environ", "/proc/1/mem"} & set(found["opened"]), (kind, found)
    assert not (set(secrets) | {"GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE"}) & set(found["env"])
# ragproof's own masks name the secrets on purpose: the runner hides them from then on.
everything = "".join(line for line in stdout.splitlines(True) if not line.startswith("::add-mask::")) + stderr
for path in (directory / "workspace").rglob("*"):
    if path.is_file():
        everything += path.read_text(errors="replace")
files = {p.name: p.read_text() for p in (directory / "file_commands").iterdir()}
assert sorted(files) == ["add_path", "save_state", "set_env", "set_output", "step_summary"], sorted(files)
assert files["set_env"] == files["add_path"] == files["save_state"] == "", files
assert files["set_output"].startswith("decision=none\n"), files["set_output"]
assert "HOSTILE" not in "".join(files.values())
for value in secrets.values():
    assert value not in everything + "".join(files.values()), f"{kind}: a secret reached the log or a file"
obeyed = obeyed_commands(stdout)
assert [c for c in obeyed if "HOSTILE" in c[0] + c[1]] == [], obeyed
assert "::" not in stderr and "##[" not in stderr, stderr[-2000:]
assert "::error::HOSTILE-error (install)" in stdout  # relayed, inside a stop-commands pair
print(f"container smoke: hostile {kind} pipeline: {len(findings)} probes, nothing found, nothing obeyed")
PY
}

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

log "hostile pipelines in the image"
hostile_run python $'  type: python\n  target: hostile:Pipeline\n' "python hostile.py install"
hostile_run command $'  type: command\n  command: [python, hostile.py, stdio]\n' "python hostile.py install"
port="$(free_port)"
hostile_run http $'  type: http\n  url: http://127.0.0.1:'"$port"$'\n' \
    "python hostile.py install; python hostile.py serve $port & python hostile.py wait $port"

# The symlinked-out-parent attack (tests/pipelines/swapper.py), as root in the image with the
# pipeline as uid 64000. LINK: whether the checkout holds `.ragproof -> /opt/pipeline`.
boundary_run() { # NAME LINK
    local name="$1" dir="$JOB/boundary-$1"
    rm -rf "$dir"
    mkdir -p "$dir/workspace" "$dir/workflow" "$dir/file_commands" "$dir/daemon"
    chmod 0777 "$dir/daemon"  # where the daemon reports (its pid, whether it saw the finished run)
    cp "$ROOT/tests/pipelines/swapper.py" "$dir/workspace/"
    printf '%s\n' '{"id": "case-1", "question": "fact 1?", "expected_source_ids": ["doc-1"]}' \
        '{"id": "case-2", "question": "fact 2?", "expected_source_ids": ["doc-1"]}' >"$dir/workspace/cases.jsonl"
    printf 'version: 1\ndataset: cases.jsonl\nadapter:\n  type: command\n  command: [python, swapper.py, stdio]\n  timeout_s: 120\n  concurrency: 1\nrun:\n  k: 1\n  metrics: [retrieval.hit_rate_at_k]\n' \
        >"$dir/workspace/ragproof.yaml"
    printf '%s\n' '{"watch": "/opt/pipeline", "artifact": "/github/workspace/.ragproof/run/run.json",
 "marker": "/github/daemon/saw-artifact", "pid_file": "/github/daemon/pid", "seconds": 120,
 "log_target": "/opt/ragproof/lib/python3*/site-packages/gate/report/markdown.py",
 "summary_target": "/github/file_commands/set_env"}' >"$dir/workspace/settings.json"
    if [ "$2" = link ]; then ln -s /opt/pipeline "$dir/workspace/.ragproof"; fi
    push_run "$dir" 4244 "python swapper.py daemon settings.json" -v "$dir/daemon:/github/daemon"
    "$PYTHON" - "$dir" "$2" <<'PY'
import sys
from pathlib import Path

directory, link = Path(sys.argv[1]), sys.argv[2] == "link"
stdout, stderr = (directory / "stdout").read_text(), (directory / "stderr").read_text()
code = int((directory / "exit").read_text())
assert "PWNED" not in stdout + stderr, (stdout[-2000:], stderr[-2000:])
assert (directory / "file_commands/set_env").read_text() == ""
if link:
    assert code == 64, (code, stderr[-2000:])
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ragproof: error: /github/workspace/.ragproof: a symbolic link; ragproof writes there as root"
    ), stderr[-2000:]
    assert not (directory / "daemon/pid").exists(), "the install command ran"
    print("container smoke: .ragproof -> /opt/pipeline refused before any untrusted code ran")
else:
    assert code == 0, (code, stdout[-2000:], stderr[-2000:])
    assert (directory / "daemon/pid").exists(), "the daemon did not start"
    assert not (directory / "daemon/saw-artifact").exists(), "the daemon outlived the run"
    assert "PWNED" in (directory / "workspace/.ragproof/run/adapter-stderr.log").read_text()
    print("container smoke: the setsid daemon was ended before the run was written")
PY
}

log "the symlinked-out-parent attack in the image"
boundary_run linked link
boundary_run own-directory none

log "push to main (baseline run)"
fresh_job
cat >"$JOB/workflow/event.json" <<EOF
{"ref": "refs/heads/main", "after": "$MAIN_SHA",
 "repository": {"id": 1001, "full_name": "acme/rag", "default_branch": "main"}}
EOF
run_action push "$MAIN_SHA" refs/heads/main http://127.0.0.1:9 ""
grep -q '^decision=none$' "$JOB/file_commands/set_output"
grep -q '^run-dir=.ragproof/run$' "$JOB/file_commands/set_output"  # relative: host steps see it
rm -rf "$JOB/baseline"
cp -r "$JOB/workspace/.ragproof/run" "$JOB/baseline"

# The pull request's checkout: a real commit, which the action checks is the PR's head.
fresh_job
git -C "$JOB/workspace" init -q
git -C "$JOB/workspace" add -A
git -C "$JOB/workspace" -c user.name=dev -c user.email=dev@example.com commit -q -m "pull request"
HEAD_SHA="$(git -C "$JOB/workspace" rev-parse HEAD)"

log "starting the GitHub API test server"
rm -f "$JOB/api-url"
"$PYTHON" "$ROOT/tests/servers/github_server.py" --scenario pull-request --head-sha "$HEAD_SHA" \
    --baseline-dir "$JOB/baseline" --ready-file "$JOB/api-url" >"$JOB/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    [ -s "$JOB/api-url" ] && break
    sleep 0.1
done
[ -s "$JOB/api-url" ] || die "the GitHub API test server did not start: $(cat "$JOB/server.log")"
api_url="$(cat "$JOB/api-url")"

log "pull_request #7 against $api_url"
cat >"$JOB/workflow/event.json" <<EOF
{"action": "synchronize", "number": 7,
 "repository": {"id": 1001, "full_name": "acme/rag", "default_branch": "main"},
 "pull_request": {"number": 7, "state": "open",
   "head": {"sha": "$HEAD_SHA", "ref": "feature", "repo": {"full_name": "acme/rag"}},
   "base": {"sha": "$MAIN_SHA", "ref": "main", "repo": {"full_name": "acme/rag"}}}}
EOF
run_action pull_request "0000000000000000000000000000000000000000" refs/pull/7/merge "$api_url" ghs_write

"$PYTHON" - "$api_url" "$JOB/file_commands/set_output" "$HEAD_SHA" <<'EOF'
import json
import sys
import urllib.request

api_url, output_file, head_sha = sys.argv[1:]
state = json.load(urllib.request.urlopen(f"{api_url}/_state", timeout=10))
comments = [c for c in state["comments"].get("7", []) if c["body"].lstrip().startswith("<!-- ragproof:ragproof -->")]
assert len(comments) == 1, f"expected one sticky comment, got {len(comments)}"
# The heading's words are the report's; that a gate was decided and nothing regressed is the
# check's conclusion and the decision output, asserted below.
heading = comments[0]["body"].splitlines()[1]
assert heading.startswith("## ragproof: ") and "Blocked" not in heading, comments[0]["body"][:500]
checks = state["check_runs"]
assert len(checks) == 1, f"expected one check run, got {len(checks)}"
check = checks[0]
assert (check["name"], check["head_sha"], check["status"], check["conclusion"]) == (
    "ragproof", head_sha, "completed", "success"), check
assert all(b["authorization"] is None for b in state["blob_requests"]) and state["blob_requests"]
outputs = open(output_file, encoding="utf-8").read()
assert "decision=pass" in outputs and "baseline-sha=c1c1" in outputs, outputs
print("container smoke: comment", comments[0]["html_url"], "and check run", check["conclusion"])
EOF
log "ok"
