"""A GitHub REST API server for tests: real HTTP on 127.0.0.1, in-memory state.

Only the endpoints ``ragproof action`` calls are served, with GitHub's shapes, status codes,
``Link`` pagination (the page size is capped server-side so tests page even with
``per_page=100``), the artifact download as a 302 to a blob server on another port (which
refuses any request carrying an Authorization header and records it), and switchable faults
(any status with any headers, e.g. a secondary-rate-limit 403 with ``Retry-After``).

Tokens: ``state.tokens`` maps a token to ``"write"`` or ``"read"``; a read-only token gets
GitHub's 403 "Resource not accessible by integration" on every write. ``GET /user`` answers
403, as it does for a workflow's installation token.

Acceptance (issue events, collaborator permissions, the check runs of a commit, created by the
GitHub Actions app) and GitHub's own validation of a check run's output (422 past 65,535 bytes)
are served by :meth:`GitHubServer._route_trust`.

Run as a script (``python tests/servers/github_server.py --scenario pull-request ...``) it
serves a ready-made scenario for the container smoke test and exposes ``GET /_state``.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
import ssl
import threading
import zipfile
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlencode, urlsplit

if __package__:  # imported by the tests as servers.github_server
    from servers import github_contract as contract
else:  # run as a script (the container smoke test)
    import github_contract as contract  # type: ignore[import-not-found,no-redef]  # the script form: beside it


def _retarget(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string (URLs of GitHub's examples)."""
    if isinstance(value, dict):
        return {key: _retarget(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_retarget(item, old, new) for item in value]
    return value.replace(old, new) if isinstance(value, str) else value


def user(login: str, user_id: int = 583231, kind: str = "User") -> dict[str, Any]:
    """A ``simple-user`` as GitHub sends it (from GitHub's example, renamed)."""
    account = _retarget(contract.example("issue-comment")["user"], "/octocat", f"/{login}")
    account.update(login=login, id=user_id, node_id=f"U_{user_id}", type=kind)
    return cast("dict[str, Any]", account)


BOT = user("github-actions[bot]", 41898282, "Bot")
WRITE_DENIED = {
    "message": "Resource not accessible by integration",
    "documentation_url": "https://docs.github.com/rest",
}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def short_repository(repository: dict[str, Any]) -> dict[str, Any]:
    """How GitHub names a repository inside ``pull_requests`` of runs and check runs."""
    return {"id": repository["id"], "url": repository["url"], "name": repository["name"]}


def minimal_pull(pull: dict[str, Any]) -> dict[str, Any]:
    """A ``pull-request-minimal``: what ``workflow_run.pull_requests`` lists (short repos)."""
    number = pull["number"]
    base_repo = pull["base"].get("repo") or {}
    return {
        "id": pull.get("id", 90000 + number),
        "number": number,
        "url": pull.get("url") or f"{base_repo.get('url', '')}/pulls/{number}",
        **{
            side: {
                "ref": pull[side]["ref"],
                "sha": pull[side]["sha"],
                "repo": short_repository(pull[side]["repo"])
                if "url" in (pull[side].get("repo") or {})
                else pull[side].get("repo"),
            }
            for side in ("head", "base")
        },
    }


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
    """The repository world the server answers from; tests arrange it before the action runs.

    Objects are GitHub's own examples from its OpenAPI description with the fields that matter
    here replaced, so every response has the shape (and every required field) GitHub sends.
    """

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
    issue_events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # login -> admin|maintain|write|triage|read
    faults: list[Fault] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    blob_requests: list[dict[str, Any]] = field(default_factory=list)
    client_ports: list[int] = field(default_factory=list)  # of every request, API and blob storage
    # Requests and responses checked against GitHub's OpenAPI description (github_contract);
    # a test that serves a malformed response on purpose turns the check off.
    check_contract: bool = True
    contract_violations: list[str] = field(default_factory=list)
    next_id: int = 5000
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def repository(self, full_name: str | None = None, repo_id: int | None = None) -> dict[str, Any]:
        """A ``full-repository`` (also valid where GitHub sends a shorter repository object)."""
        name = full_name or self.full_name
        owner = name.split("/")[0]
        repo = contract.example("full-repository-default-response")
        for optional in ("parent", "source", "template_repository", "organization"):
            repo.pop(optional, None)
        repo = _retarget(repo, "octocat/Hello-World", name)
        repo.update(
            id=repo_id if repo_id is not None else self.repo_id,
            node_id=f"R_{repo_id if repo_id is not None else self.repo_id}",
            name=name.split("/")[1],
            full_name=name,
            owner=user(owner, 7000 + len(owner), "Organization"),
            default_branch=self.default_branch,
            html_url=f"https://github.example/{name}",
            fork=full_name is not None and full_name != self.full_name,
            language=None,
        )
        return cast("dict[str, Any]", repo)

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
        """A completed workflow run; ``pull_requests`` entries are cut to GitHub's short form."""
        run_id = self.new_id()
        repo_name, repo_id = head_repository or (self.full_name, self.repo_id)
        run = _retarget(
            contract.example("workflow-run-paginated")["workflow_runs"][0],
            "octo-org/octo-repo",
            self.full_name,
        )
        run = _retarget(run, "30433642", str(run_id))
        when = iso(created_at or self.commits.get(head_sha, {}).get("date") or datetime.now(UTC))
        run.update(
            id=run_id,
            node_id=f"WFR_{run_id}",
            name="ragproof",
            display_title="ragproof",
            event=event,
            status="completed",
            conclusion=conclusion,
            head_sha=head_sha,
            head_branch=head_branch or self.default_branch,
            head_repository=self.repository(repo_name, repo_id),
            repository=self.repository(),
            path=f".github/workflows/{workflow}",
            workflow_id=77,
            run_number=len(self.runs) + 1,
            html_url=f"https://github.example/{self.full_name}/actions/runs/{run_id}",
            created_at=when,
            updated_at=when,
            run_started_at=when,
            head_commit={**run["head_commit"], "id": head_sha, "timestamp": when},
            pull_requests=[minimal_pull(entry) for entry in pull_requests or []],
        )
        self.runs.append(run)
        return run_id

    def add_artifact(self, run_id: int, name: str, data: bytes, *, expired: bool = False) -> int:
        artifact_id = self.new_id()
        run = next(r for r in self.runs if r["id"] == run_id)
        now = datetime.now(UTC)
        artifact = contract.example("artifact-paginated")["artifacts"][0]
        artifact.pop("digest", None)  # not required; GitHub's example digest is of another file
        artifact.update(
            id=artifact_id,
            node_id=f"A_{artifact_id}",
            name=name,
            size_in_bytes=len(data),
            url=f"https://api.github.example/repos/{self.full_name}/actions/artifacts/{artifact_id}",
            archive_download_url=f"https://api.github.example/repos/{self.full_name}/actions/artifacts/{artifact_id}/zip",
            expired=expired,
            created_at=iso(now - timedelta(days=1)),
            updated_at=iso(now - timedelta(days=1)),
            expires_at=iso(now - timedelta(hours=1) if expired else now + timedelta(days=30)),
            workflow_run={
                "id": run_id,
                "repository_id": self.repo_id,
                "head_repository_id": run["head_repository"]["id"],
                "head_branch": run["head_branch"],
                "head_sha": run["head_sha"],
            },
        )
        self.artifacts.setdefault(run_id, []).append(artifact)
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
        pull = _retarget(contract.example("pull-request"), "octocat/Hello-World", self.full_name)
        pull = _retarget(pull, "/1347", f"/{number}")
        head_owner = repo_name.split("/")[0]
        pull.update(
            id=90000 + number,
            node_id=f"PR_{number}",
            number=number,
            state="open",
            html_url=f"https://github.example/{self.full_name}/pull/{number}",
            requested_teams=[],
            head={
                "label": f"{head_owner}:{head_ref}",
                "ref": head_ref,
                "sha": head_sha,
                "user": user(head_owner, 7000 + len(head_owner), "Organization"),
                "repo": self.repository(repo_name, repo_id),
            },
            base={
                "label": f"{self.owner}:{self.default_branch}",
                "ref": self.default_branch,
                "sha": self.branches.get(self.default_branch, "0" * 40),
                "user": user(self.owner, 7000 + len(self.owner), "Organization"),
                "repo": self.repository(),
            },
        )
        self.pulls[number] = pull
        return cast("dict[str, Any]", pull)

    def add_comment(self, issue: int, body: str, user_: dict[str, Any] | None = None) -> dict[str, Any]:
        """A comment by ``user_`` (login and type given; the rest of the account is filled in)."""
        comment_id = self.new_id()
        author = BOT if user_ is None else {**user(user_["login"], 6000 + len(user_["login"])), **user_}
        now = iso(datetime.now(UTC))
        comment = contract.example("issue-comment")
        comment.update(
            id=comment_id,
            node_id=f"IC_{comment_id}",
            body=body,
            user=author,
            url=f"https://api.github.example/repos/{self.full_name}/issues/comments/{comment_id}",
            html_url=f"https://github.example/{self.full_name}/pull/{issue}#issuecomment-{comment_id}",
            issue_url=f"https://api.github.example/repos/{self.full_name}/issues/{issue}",
            created_at=now,
            updated_at=now,
        )
        self.comments.setdefault(issue, []).append(comment)
        return cast("dict[str, Any]", comment)

    def add_check_run(self, body: dict[str, Any]) -> dict[str, Any]:
        """The check run ``POST /check-runs`` creates from ``body``."""
        check_id = self.new_id()
        check = contract.example("check-run-example-of-completed-conclusion")
        check.update({key: value for key, value in body.items() if key != "output"})
        output = body.get("output", {})
        # Created with a workflow's token: the GitHub Actions app (GitHub's example names another).
        check["app"] = {**check["app"], "id": 15368, "slug": "github-actions", "name": "GitHub Actions"}
        check.update(
            id=check_id,
            node_id=f"CR_{check_id}",
            external_id=body.get("external_id", ""),
            url=f"https://api.github.example/repos/{self.full_name}/check-runs/{check_id}",
            html_url=f"https://github.example/{self.full_name}/runs/1",
            details_url=body.get("details_url"),
            started_at=body.get("started_at", body.get("completed_at")),
            completed_at=body.get("completed_at"),
            conclusion=body.get("conclusion"),
            output={
                "title": output.get("title"),
                "summary": output.get("summary"),
                "text": output.get("text"),
                "annotations_count": 0,
                "annotations_url": f"https://api.github.example/repos/{self.full_name}/check-runs/{check_id}/annotations",
            },
            pull_requests=[],
        )
        self.check_runs.append(check)
        return cast("dict[str, Any]", check)

    def label(self, issue: int, label: str, actor: str, *, removed: bool = False) -> dict[str, Any]:
        """A ``labeled`` (or ``unlabeled``) event by ``actor`` on the issue's event list."""
        event_id = self.new_id()
        event = _retarget(
            contract.example("issue-event-for-issue-items")[0], "octocat/Hello-World", self.full_name
        )
        event.update(
            id=event_id,
            node_id=f"LE_{event_id}",
            url=f"https://api.github.example/repos/{self.full_name}/issues/events/{event_id}",
            actor=user(actor, 7000 + len(actor)),
            event="unlabeled" if removed else "labeled",
            commit_id=None,
            commit_url=None,
            created_at=iso(datetime.now(UTC)),
            label={"name": label, "color": "0e8a16"},
        )
        self.issue_events.setdefault(issue, []).append(event)
        return cast("dict[str, Any]", event)

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
        # GitHub's error bodies carry both (its "validation-failed" schema requires them)
        body = {"message": message, "documentation_url": "https://docs.github.com/rest"}
        self.faults.append(Fault(method, pattern, status, headers or {}, body, times))

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
        """A ``commit`` of the compare API (GitHub's example, this commit's sha, date, parents)."""
        commit = contract.example("commit-comparison")["base_commit"]
        commit = _retarget(commit, commit["sha"], sha)
        date = self.commits.get(sha, {}).get("date") or datetime(2026, 1, 1, tzinfo=UTC)
        commit["commit"]["committer"]["date"] = iso(date)
        commit["commit"]["author"]["date"] = iso(date)
        commit["parents"] = [
            {"sha": parent, "url": f"https://api.github.example/repos/{self.full_name}/commits/{parent}"}
            for parent in self.commits.get(sha, {}).get("parents", [])
        ]
        return cast("dict[str, Any]", commit)

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
                "contract_violations": self.contract_violations,
            }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    checked_request: tuple[str, str] | None = None  # (method, path) whose response is checked

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
        if self.checked_request is not None:
            state = self.server.owner.state
            errors = contract.response_errors(*self.checked_request, status, body)
            with state.lock:
                state.contract_violations.extend(errors)
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


# Every server started in this process, for the shared fixture that checks the contract.
STARTED: list[GitHubServer] = []


class GitHubServer:
    """Serves ``state`` on an API port and a blob port; use as a context manager."""

    def __init__(self, state: GitHubState | None = None, *, tls: ssl.SSLContext | None = None) -> None:
        self.state = state or GitHubState()
        self._api = _Server(("127.0.0.1", 0), self)
        self._blob = _Server(("127.0.0.1", 0), self)
        self.scheme = "https" if tls else "http"
        if tls is not None:  # both ports speak TLS with the caller's certificate
            for server in (self._api, self._blob):
                server.socket = tls.wrap_socket(server.socket, server_side=True)
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._api.server_address[1]}"

    @property
    def blob_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._blob.server_address[1]}"

    def start(self) -> GitHubServer:
        for server in (self._api, self._blob):
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        STARTED.append(self)
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
        raw_query = parse_qs(split.query, keep_blank_values=True)
        path, query = split.path, {k: v[-1] for k, v in raw_query.items()}
        if h.server is self._blob:
            self._serve_blob(h, path)
            return
        st = self.state
        h.checked_request = None
        if st.check_contract and path != "/_state":
            # Recorded before the response is written: a client that has its answer can rely on it.
            errors = contract.request_errors(method, path, raw_query, body)
            with st.lock:
                st.contract_violations.extend(errors)
            if not errors:
                h.checked_request = (method, path)
        self._serve_api(h, method, path, query, body)

    def _serve_api(self, h: _Handler, method: str, path: str, query: dict[str, str], body: Any) -> None:
        st = self.state
        auth = h.headers.get("Authorization")
        with st.lock:
            st.requests.append({"method": method, "path": path, "query": query, "body": body})
            st.client_ports.append(h.client_address[1])
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
            links.append(f'<{self.scheme}://{host}{split.path}?{urlencode(q)}>; rel="{rel}"')
        if links:
            headers["Link"] = ", ".join(links)
        payload: Any = {"total_count": len(items), key: chunk} if key else chunk
        h._send(200, payload, headers)

    def _route_repo(self, h: _Handler, method: str, rest: str, query: dict[str, str], body: Any) -> None:
        if self._route_trust(h, method, rest, query, body):
            return
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
            comparison = _retarget(contract.example("commit-comparison"), "octocat/Hello-World", st.full_name)
            comparison.update(
                status=status,
                ahead_by=ahead,
                behind_by=behind,
                total_commits=ahead,
                merge_base_commit=st.commit_json(merge_base),
                base_commit=st.commit_json(base),
                commits=[],
                files=[],
            )
            h._send(200, comparison, ok)
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
            h._send(201, st.add_check_run(body), ok)
        else:
            h._send(404, {"message": "Not Found"})

    # Limit GitHub applies to each of a check run's output.summary and output.text (bytes).
    CHECK_OUTPUT_LIMIT = 65_535
    _PERMISSION_OF_ROLE = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read"}

    def _route_trust(self, h: _Handler, method: str, rest: str, query: dict[str, str], body: Any) -> bool:
        """Issue events, collaborator permissions, check-run output validation; False: not answered here."""
        st = self.state
        ok = {"x-ratelimit-remaining": "4999"}
        m = re.fullmatch
        if method == "POST" and rest == "/check-runs":
            output = (body or {}).get("output") or {}
            for part in ("summary", "text"):
                size = len(str(output.get(part) or "").encode("utf-8"))
                if size > self.CHECK_OUTPUT_LIMIT:
                    h._send(
                        422,
                        {
                            "message": "Invalid request.\n\nOnly 65535 characters are allowed; "
                            f"{size} were supplied.",
                            "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run",
                        },
                    )
                    return True
            return False
        if method == "GET" and (g := m(r"/commits/([^/]+)/check-runs", rest)):
            checks = [
                c
                for c in st.check_runs
                if c["head_sha"] == g[1] and query.get("check_name", c["name"]) == c["name"]
            ]
            self._page(h, list(reversed(checks)), query, "check_runs")  # newest first
            return True
        if method == "GET" and (g := m(r"/issues/(\d+)/events", rest)):
            self._page(h, st.issue_events.get(int(g[1]), []), query)
            return True
        if method == "GET" and (g := m(r"/collaborators/([^/]+)/permission", rest)):
            role = st.roles.get(g[1], "read")
            answer = contract.example(
                "repository-collaborator-permission-response-if-user-has-admin-permissions"
            )
            answer.update(permission=self._PERMISSION_OF_ROLE.get(role, role), role_name=role)
            answer["user"] = _retarget(answer["user"], "/octocat", f"/{g[1]}")
            # GitHub's example lacks the user's role_name, which its schema requires.
            answer["user"].update(
                login=g[1], id=7000 + len(g[1]), node_id=f"U_{7000 + len(g[1])}", role_name=role
            )
            h._send(200, answer, ok)
            return True
        return False

    def _serve_blob(self, h: _Handler, path: str) -> None:
        st = self.state
        auth = h.headers.get("Authorization")
        with st.lock:
            st.blob_requests.append({"path": path, "authorization": auth})
            st.client_ports.append(h.client_address[1])
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


def pull_request_scenario(
    state: GitHubState, baseline_zip: bytes, *, artifact: str = "ragproof-run", head_sha: str = "a1" * 20
) -> None:
    """main: c0 <- c1 (baseline run with artifact) ; PR #7 head ``head_sha`` branched from c1."""
    day = datetime(2026, 3, 1, tzinfo=UTC)
    state.add_commit("c0" * 20, [], day)
    state.add_commit("c1" * 20, ["c0" * 20], day + timedelta(hours=1))
    state.add_commit(head_sha, ["c1" * 20], day + timedelta(hours=2))
    state.branches["main"] = "c1" * 20
    state.branches["feature"] = head_sha
    run_id = state.add_run(head_sha="c1" * 20)
    state.add_artifact(run_id, artifact, baseline_zip)
    state.add_pull(7, head_sha=head_sha)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", choices=["pull-request", "empty"], default="empty")
    parser.add_argument("--baseline-dir", type=Path, help="run directory served as the baseline artifact")
    parser.add_argument("--ready-file", type=Path, help="write the API URL here once listening")
    parser.add_argument("--head-sha", default="a1" * 20, help="the head commit of pull request #7")
    args = parser.parse_args()
    state = GitHubState()
    if args.scenario == "pull-request":
        if args.baseline_dir is None:
            parser.error("--scenario pull-request needs --baseline-dir")
        pull_request_scenario(state, zip_directory(args.baseline_dir), head_sha=args.head_sha)
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
