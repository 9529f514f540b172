"""A GitHub REST API server for tests: real HTTP on 127.0.0.1, in-memory state.

Only the endpoints ``ragproof action`` calls are served, with GitHub's shapes, status codes,
``Link`` pagination (the page size is capped server-side so tests page even with
``per_page=100``), the artifact download as a 302 to a blob server on another port (which
refuses any request carrying an Authorization header and records it), and switchable faults
(any status with any headers, e.g. a secondary-rate-limit 403 with ``Retry-After``).

Tokens: ``state.tokens`` maps a token to ``"write"`` or ``"read"``; a read-only token gets
GitHub's 403 "Resource not accessible by integration" on every write. ``GET /user`` answers
403, as it does for a workflow's installation token.

Run as a script (``python tests/servers/github_server.py --scenario pull-request ...``) it
serves a ready-made scenario for the container smoke test and exposes ``GET /_state``.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
import threading
import zipfile
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

BOT = {"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
WRITE_DENIED = {
    "message": "Resource not accessible by integration",
    "documentation_url": "https://docs.github.com/rest",
}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Fault:
    method: str
    pattern: str  # regex matched against the request path
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "injected fault"})
    remaining: int = 1


@dataclass
class GitHubState:
    """The repository world the server answers from; tests arrange it before the action runs."""

    owner: str = "acme"
    name: str = "rag"
    repo_id: int = 1001
    default_branch: str = "main"
    page_size: int = 2
    tokens: dict[str, str] = field(default_factory=lambda: {"ghs_write": "write", "ghs_read": "read"})
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    blobs: dict[int, bytes] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    blob_requests: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 5000
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def repository(self, full_name: str | None = None, repo_id: int | None = None) -> dict[str, Any]:
        name = full_name or self.full_name
        return {
            "id": repo_id if repo_id is not None else self.repo_id,
            "name": name.split("/")[1],
            "full_name": name,
            "owner": {"login": name.split("/")[0], "type": "Organization"},
            "default_branch": self.default_branch,
            "html_url": f"https://github.example/{name}",
            "fork": full_name is not None and full_name != self.full_name,
        }

    def new_id(self) -> int:
        with self.lock:
            self.next_id += 1
            return self.next_id

    # -- arranging ---------------------------------------------------------------------------
    def add_commit(self, sha: str, parents: list[str] | None = None, date: datetime | None = None) -> str:
        self.commits[sha] = {"parents": list(parents or []), "date": date or datetime(2026, 1, 1, tzinfo=UTC)}
        return sha

    def add_run(
        self,
        *,
        head_sha: str,
        event: str = "push",
        head_branch: str | None = None,
        workflow: str = "pr-gate.yml",
        conclusion: str = "success",
        created_at: datetime | None = None,
        head_repository: tuple[str, int] | None = None,
        pull_requests: list[dict[str, Any]] | None = None,
    ) -> int:
        run_id = self.new_id()
        repo_name, repo_id = head_repository or (self.full_name, self.repo_id)
        self.runs.append(
            {
                "id": run_id,
                "name": "ragproof",
                "event": event,
                "status": "completed",
                "conclusion": conclusion,
                "head_sha": head_sha,
                "head_branch": head_branch or self.default_branch,
                "head_repository": self.repository(repo_name, repo_id),
                "repository": self.repository(),
                "path": f".github/workflows/{workflow}",
                "workflow_id": 77,
                "run_number": len(self.runs) + 1,
                "html_url": f"https://github.example/{self.full_name}/actions/runs/{run_id}",
                "created_at": iso(
                    created_at or self.commits.get(head_sha, {}).get("date") or datetime.now(UTC)
                ),
                "head_commit": {"id": head_sha},
                "pull_requests": pull_requests or [],
            }
        )
        return run_id

    def add_artifact(self, run_id: int, name: str, data: bytes, *, expired: bool = False) -> int:
        artifact_id = self.new_id()
        run = next(r for r in self.runs if r["id"] == run_id)
        now = datetime.now(UTC)
        self.artifacts.setdefault(run_id, []).append(
            {
                "id": artifact_id,
                "node_id": f"A_{artifact_id}",
                "name": name,
                "size_in_bytes": len(data),
                "url": f"/repos/{self.full_name}/actions/artifacts/{artifact_id}",
                "archive_download_url": f"/repos/{self.full_name}/actions/artifacts/{artifact_id}/zip",
                "expired": expired,
                "created_at": iso(now - timedelta(days=1)),
                "expires_at": iso(now - timedelta(hours=1) if expired else now + timedelta(days=30)),
                "workflow_run": {
                    "id": run_id,
                    "repository_id": self.repo_id,
                    "head_repository_id": run["head_repository"]["id"],
                    "head_branch": run["head_branch"],
                    "head_sha": run["head_sha"],
                },
            }
        )
        self.blobs[artifact_id] = data
        return artifact_id

    def add_pull(
        self,
        number: int,
        *,
        head_sha: str,
        head_ref: str = "feature",
        head_repo: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        repo_name, repo_id = head_repo or (self.full_name, self.repo_id)
        pull = {
            "number": number,
            "state": "open",
            "html_url": f"https://github.example/{self.full_name}/pull/{number}",
            "head": {"sha": head_sha, "ref": head_ref, "repo": self.repository(repo_name, repo_id)},
            "base": {
                "sha": self.branches.get(self.default_branch, ""),
                "ref": self.default_branch,
                "repo": self.repository(),
            },
        }
        self.pulls[number] = pull
        return pull

    def add_comment(self, issue: int, body: str, user: dict[str, Any] | None = None) -> dict[str, Any]:
        comment_id = self.new_id()
        comment = {
            "id": comment_id,
            "body": body,
            "user": user or BOT,
            "html_url": f"https://github.example/{self.full_name}/pull/{issue}#issuecomment-{comment_id}",
            "created_at": iso(datetime.now(UTC)),
        }
        self.comments.setdefault(issue, []).append(comment)
        return comment

    def fail(
        self,
        method: str,
        pattern: str,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        message: str = "injected fault",
        times: int = 1,
    ) -> None:
        self.faults.append(Fault(method, pattern, status, headers or {}, {"message": message}, times))

    def secondary_rate_limit(self, method: str, pattern: str, *, retry_after: int = 1) -> None:
        """GitHub's secondary rate limit: a 403 with ``Retry-After`` (once)."""
        self.fail(
            method,
            pattern,
            403,
            headers={"Retry-After": str(retry_after)},
            message="You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        )

    # -- queries -----------------------------------------------------------------------------
    def ancestors(self, sha: str) -> list[str]:
        """``sha`` and its ancestors, nearest first (breadth-first)."""
        order: list[str] = []
        queue = deque([sha])
        seen = {sha}
        while queue:
            current = queue.popleft()
            order.append(current)
            for parent in self.commits.get(current, {}).get("parents", []):
                if parent not in seen:
                    seen.add(parent)
                    queue.append(parent)
        return order

    def commit_json(self, sha: str) -> dict[str, Any]:
        date = self.commits.get(sha, {}).get("date")
        return {"sha": sha, "commit": {"committer": {"date": iso(date) if date else None}}}

    def resolve(self, ref: str) -> str | None:
        if ref in self.commits:
            return ref
        return self.branches.get(ref)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "comments": self.comments,
                "check_runs": self.check_runs,
                "blob_requests": self.blob_requests,
                "requests": self.requests,
            }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- plumbing ----------------------------------------------------------------------------
    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, bytes | bytearray):
            payload = bytes(body)
            content_type = "application/zip"
        elif body is None:
            payload = b""
            content_type = "application/json"
        else:
            payload = json.dumps(body).encode()
            content_type = "application/json; charset=utf-8"
        lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        merged = {"Content-Type": content_type, "Content-Length": str(len(payload))}
        merged.update(headers or {})
        lines += [f"{k}: {v}" for k, v in merged.items()]
        # One write per response: head and body together.
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        self.wfile.flush()

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        body = self._body() if method != "GET" else None
        try:
            self.server.route(self, method, body)
        except Exception as exc:  # a bug in the test server must be visible, not a hang
            self._send(500, {"message": f"test server error: {exc!r}"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: GitHubServer) -> None:
        super().__init__(address, _Handler)
        self.owner = owner

    def route(self, handler: _Handler, method: str, body: Any) -> None:
        self.owner.handle(handler, method, body)


class GitHubServer:
    """Serves ``state`` on an API port and a blob port; use as a context manager."""

    def __init__(self, state: GitHubState | None = None) -> None:
        self.state = state or GitHubState()
        self._api = _Server(("127.0.0.1", 0), self)
        self._blob = _Server(("127.0.0.1", 0), self)
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._api.server_address[1]}"

    @property
    def blob_url(self) -> str:
        return f"http://127.0.0.1:{self._blob.server_address[1]}"

    def start(self) -> GitHubServer:
        for server in (self._api, self._blob):
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in (self._api, self._blob):
            server.shutdown()
            server.server_close()

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling --------------------------------------------------------------------
    def handle(self, h: _Handler, method: str, body: Any) -> None:
        split = urlsplit(h.path)
        path, query = split.path, {k: v[-1] for k, v in parse_qs(split.query).items()}
        if h.server is self._blob:
            self._serve_blob(h, path)
            return
        st = self.state
        auth = h.headers.get("Authorization")
        with st.lock:
            st.requests.append({"method": method, "path": path, "query": query, "body": body})
        if path == "/_state":
            h._send(200, st.snapshot())
            return
        token = auth.split(" ", 1)[1] if auth and " " in auth else None
        access = st.tokens.get(token or "")
        if access is None:
            h._send(401, {"message": "Bad credentials"})
            return
        with st.lock:
            for fault in st.faults:
                if fault.remaining > 0 and fault.method == method and re.search(fault.pattern, path):
                    fault.remaining -= 1
                    h._send(fault.status, fault.body, {"x-ratelimit-remaining": "4000", **fault.headers})
                    return
        base = f"/repos/{st.full_name}"
        if path == "/user":
            h._send(403, WRITE_DENIED)
            return
        if not path.startswith(base):
            h._send(404, {"message": "Not Found"})
            return
        rest = path[len(base) :]
        if method in ("POST", "PATCH") and access != "write":
            h._send(403, WRITE_DENIED)
            return
        self._route_repo(h, method, rest, query, body)

    def _page(self, h: _Handler, items: list[Any], query: dict[str, str], key: str | None = None) -> None:
        per_page = min(int(query.get("per_page", 30)), 100, self.state.page_size)
        page = int(query.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(items) // per_page))
        headers = {"x-ratelimit-remaining": "4999"}
        split = urlsplit(h.path)
        host = h.headers.get("Host")
        links = []
        for rel, number in (("next", page + 1), ("last", last)):
            if rel == "next" and page >= last:
                continue
            q = {**query, "page": str(number)}
            links.append(f'<http://{host}{split.path}?{urlencode(q)}>; rel="{rel}"')
        if links:
            headers["Link"] = ", ".join(links)
        payload: Any = {"total_count": len(items), key: chunk} if key else chunk
        h._send(200, payload, headers)

    def _route_repo(self, h: _Handler, method: str, rest: str, query: dict[str, str], body: Any) -> None:
        st = self.state
        ok = {"x-ratelimit-remaining": "4999"}
        m = re.fullmatch
        if method == "GET" and rest == "":
            h._send(200, st.repository(), ok)
        elif method == "GET" and (g := m(r"/compare/(.+)\.\.\.(.+)", rest)):
            base, head = st.resolve(g[1]), st.resolve(g[2])
            if base is None or head is None:
                h._send(404, {"message": "Not Found"})
                return
            head_anc, base_anc = st.ancestors(head), st.ancestors(base)
            merge_base = next((c for c in head_anc if c in set(base_anc)), None)
            if merge_base is None:
                h._send(404, {"message": "No common ancestor"})
                return
            ahead = len(set(head_anc) - set(base_anc))
            behind = len(set(base_anc) - set(head_anc))
            status = (
                "identical"
                if not ahead and not behind
                else "ahead"
                if not behind
                else "behind"
                if not ahead
                else "diverged"
            )
            h._send(
                200,
                {
                    "status": status,
                    "ahead_by": ahead,
                    "behind_by": behind,
                    "merge_base_commit": st.commit_json(merge_base),
                    "base_commit": st.commit_json(base),
                },
                ok,
            )
        elif method == "GET" and (g := m(r"/actions/workflows/([^/]+)/runs", rest)):
            workflow = g[1]
            runs = [
                r
                for r in st.runs
                if r["path"].rsplit("/", 1)[-1] == workflow or str(r["workflow_id"]) == workflow
            ]
            if not runs and not any(r["path"].endswith("/" + workflow) for r in st.runs):
                h._send(404, {"message": "Not Found"})
                return
            if "branch" in query:
                runs = [r for r in runs if r["head_branch"] == query["branch"]]
            if "event" in query:
                runs = [r for r in runs if r["event"] == query["event"]]
            if "status" in query:
                runs = [r for r in runs if query["status"] in (r["status"], r["conclusion"])]
            if "head_sha" in query:
                runs = [r for r in runs if r["head_sha"] == query["head_sha"]]
            runs = sorted(runs, key=lambda r: r["created_at"], reverse=True)
            self._page(h, runs, query, "workflow_runs")
        elif method == "GET" and (g := m(r"/actions/runs/(\d+)", rest)):
            run = next((r for r in st.runs if r["id"] == int(g[1])), None)
            h._send(200, run, ok) if run else h._send(404, {"message": "Not Found"})
        elif method == "GET" and (g := m(r"/actions/runs/(\d+)/artifacts", rest)):
            items = st.artifacts.get(int(g[1]), [])
            if "name" in query:
                items = [a for a in items if a["name"] == query["name"]]
            self._page(h, items, query, "artifacts")
        elif method == "GET" and (g := m(r"/actions/artifacts/(\d+)/zip", rest)):
            artifact_id = int(g[1])
            artifact = next(
                (a for items in st.artifacts.values() for a in items if a["id"] == artifact_id), None
            )
            if artifact is None:
                h._send(404, {"message": "Not Found"})
            elif artifact["expired"]:
                h._send(410, {"message": "Artifact has expired"})
            else:
                h._send(302, None, {"Location": f"{self.blob_url}/blob/{artifact_id}?sig=signed"})
        elif method == "GET" and (g := m(r"/pulls/(\d+)", rest)):
            pull = st.pulls.get(int(g[1]))
            h._send(200, pull, ok) if pull else h._send(404, {"message": "Not Found"})
        elif method == "GET" and rest == "/pulls":
            pulls = [p for p in st.pulls.values() if query.get("state", "open") in ("all", p["state"])]
            if "head" in query:
                owner, _, branch = query["head"].partition(":")
                pulls = [
                    p
                    for p in pulls
                    if p["head"]["ref"] == branch and p["head"]["repo"]["full_name"].split("/")[0] == owner
                ]
            self._page(h, pulls, query)
        elif (g := m(r"/issues/(\d+)/comments", rest)) and method in ("GET", "POST"):
            issue = int(g[1])
            if issue not in st.pulls:
                h._send(404, {"message": "Not Found"})
            elif method == "GET":
                self._page(h, st.comments.get(issue, []), query)
            else:
                h._send(201, st.add_comment(issue, body["body"]), ok)
        elif method == "PATCH" and (g := m(r"/issues/comments/(\d+)", rest)):
            comment = next((c for cs in st.comments.values() for c in cs if c["id"] == int(g[1])), None)
            if comment is None:
                h._send(404, {"message": "Not Found"})
            elif comment["user"]["login"] != BOT["login"]:
                h._send(403, WRITE_DENIED)
            else:
                comment["body"] = body["body"]
                h._send(200, comment, ok)
        elif method == "POST" and rest == "/check-runs":
            run = {"id": st.new_id(), **body, "html_url": f"https://github.example/{st.full_name}/runs/1"}
            st.check_runs.append(run)
            h._send(201, run, ok)
        else:
            h._send(404, {"message": "Not Found"})

    def _serve_blob(self, h: _Handler, path: str) -> None:
        st = self.state
        auth = h.headers.get("Authorization")
        with st.lock:
            st.blob_requests.append({"path": path, "authorization": auth})
        g = re.fullmatch(r"/blob/(\d+)", path)
        if auth is not None:
            h._send(403, {"message": "blob storage refuses requests carrying credentials"})
        elif g is None or int(g[1]) not in st.blobs:
            h._send(404, {"message": "no such blob"})
        else:
            h._send(200, st.blobs[int(g[1])])


def zip_directory(directory: Path) -> bytes:
    """The zip actions/upload-artifact makes of a directory: its files at the archive root."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(directory.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(directory).as_posix())
    return buffer.getvalue()


def pull_request_scenario(state: GitHubState, baseline_zip: bytes, *, artifact: str = "ragproof-run") -> None:
    """main: c0 <- c1 (baseline run with artifact) ; PR #7 head h1 branched from c1."""
    day = datetime(2026, 3, 1, tzinfo=UTC)
    state.add_commit("c0" * 20, [], day)
    state.add_commit("c1" * 20, ["c0" * 20], day + timedelta(hours=1))
    state.add_commit("a1" * 20, ["c1" * 20], day + timedelta(hours=2))
    state.branches["main"] = "c1" * 20
    state.branches["feature"] = "a1" * 20
    run_id = state.add_run(head_sha="c1" * 20)
    state.add_artifact(run_id, artifact, baseline_zip)
    state.add_pull(7, head_sha="a1" * 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", choices=["pull-request", "empty"], default="empty")
    parser.add_argument("--baseline-dir", type=Path, help="run directory served as the baseline artifact")
    parser.add_argument("--ready-file", type=Path, help="write the API URL here once listening")
    args = parser.parse_args()
    state = GitHubState()
    if args.scenario == "pull-request":
        if args.baseline_dir is None:
            parser.error("--scenario pull-request needs --baseline-dir")
        pull_request_scenario(state, zip_directory(args.baseline_dir))
    server = GitHubServer(state).start()
    if args.ready_file:
        args.ready_file.write_text(server.url + "\n")
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
