"""Proxies and private CAs from the environment: the GitHub client (and ``ragproof action``)
and the judge client go through the proxy the environment names, skip it for NO_PROXY hosts,
and trust the CA bundle it names. A counting proxy on 127.0.0.1 (tests/servers/proxy_server.py)
relays; the servers record their clients' ports, so each request is seen coming through it."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_helpers import (
    GOOD,
    ActionRun,
    client_for,
    make_workspace,
    pull_request_event,
    run_action,
    write_run,
)
from judge_helpers import judge_config
from run_helpers import run_one_case
from servers.github_server import GitHubServer, GitHubState, pull_request_scenario, zip_directory
from servers.judge_server import JudgeServer, reply
from servers.pipeline_server import PipelineServer
from servers.proxy_server import ProxyServer
from servers.tls import PrivateCA

from gate.adapters import build_adapter
from gate.adapters.base import AdapterError
from gate.core.environment import Environment
from gate.core.errors import JudgeError
from gate.core.network import NetworkSettings
from gate.github.client import GitHubAPIError, GitHubClient
from gate.judge.replies import RefusalReply
from gate.judge.session import JudgeSession, build_judge
from gate.model.config import parse_config

QUESTION = {"question": "Is the sky green?", "answer": "I don't know."}
VERDICT = {"declined": True, "reason": "says it does not know"}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return PrivateCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def proxy() -> Iterator[ProxyServer]:
    with ProxyServer() as running:
        yield running


# -- the settings ---------------------------------------------------------------------------


def test_settings_are_read_as_curl_and_requests_read_them() -> None:
    settings = NetworkSettings.from_variables(
        {
            "HTTPS_PROXY": "http://upper:3128",
            "https_proxy": "proxy.corp:3128",  # lower case wins; no scheme means http://
            "ALL_PROXY": "http://all:8080",
            "NO_PROXY": " .internal.example, 10.0.0.0/8 ,localhost:8443,[::1]",
            "SSL_CERT_FILE": "/etc/ssl/corp.pem",
            "REQUESTS_CA_BUNDLE": "",  # empty: unset, never "no verification"
        }
    )
    assert settings == NetworkSettings(
        http_proxy="http://all:8080",
        https_proxy="http://proxy.corp:3128",
        no_proxy=(".internal.example", "10.0.0.0/8", "localhost:8443", "[::1]"),
        ca_bundle="/etc/ssl/corp.pem",
    )
    assert settings.proxy_for("https://api.github.com/repos") == "http://proxy.corp:3128"
    assert settings.proxy_for("http://pipeline:8000/answer") == "http://all:8080"
    assert settings.proxy_for("https://ghe.internal.example/api/v3") is None
    assert settings.proxy_for("https://internal.example/") is None
    assert settings.proxy_for("https://notinternal.example/") == "http://proxy.corp:3128"
    assert settings.proxy_for("http://10.1.2.3/x") is None
    assert settings.proxy_for("http://11.1.2.3/x") == "http://all:8080"
    assert settings.proxy_for("https://localhost:8443/") is None
    assert settings.proxy_for("https://localhost/") == "http://proxy.corp:3128"  # other port
    assert settings.proxy_for("http://[::1]:9000/") is None
    assert settings.requests_options("https://api.github.com/") == {
        "proxies": {"https": "http://proxy.corp:3128"},
        "verify": "/etc/ssl/corp.pem",
    }
    assert (
        NetworkSettings.from_variables({"NO_PROXY": "*", "HTTPS_PROXY": "p:1"}).proxy_for("https://a/")
        is None
    )
    assert NetworkSettings.from_variables({}).requests_options("https://a/") == {
        "proxies": {},
        "verify": True,
    }
    assert NetworkSettings.from_variables({"SSL_CERT_DIR": "/etc/ssl/certs"}).ca_bundle == "/etc/ssl/certs"


# -- the GitHub client -----------------------------------------------------------------------


def _pull_request_world(tmp_path: Path) -> GitHubState:
    """PR #7 with a baseline on the server; the candidate run in the workspace."""
    state = GitHubState(page_size=2)
    pull_request_scenario(state, zip_directory(write_run(tmp_path / "baseline", GOOD)))
    workspace = make_workspace(tmp_path)
    write_run(workspace / "candidate", GOOD, commit="a1" * 20, run_id="candidate")
    return state


def test_github_client_requests_go_through_http_proxy(proxy: ProxyServer) -> None:
    state = GitHubState(page_size=2)
    state.add_pull(7, head_sha="a1" * 20)
    for i in range(5):
        state.add_comment(7, f"c{i}")
    with GitHubServer(state) as server:
        network = NetworkSettings.from_variables(
            {"HTTP_PROXY": proxy.url, "HTTPS_PROXY": "http://127.0.0.1:9"}
        )
        client = client_for(server, network=network)
        assert client.call("repos.get")["full_name"] == "acme/rag"
        assert len(list(client.paginate("issues.list_comments", issue_number=7))) == 5
    ports = state.client_ports
    assert len(ports) == 4  # the repository and three pages of comments
    assert set(ports) <= proxy.upstream_ports
    assert [r["method"] for r in proxy.relayed] == ["GET"] * 4
    assert all(r["target"].startswith(server.url + "/repos/acme/rag") for r in proxy.relayed)


def test_no_proxy_hosts_are_reached_directly(proxy: ProxyServer) -> None:
    state = GitHubState()
    with GitHubServer(state) as server:
        network = NetworkSettings.from_variables({"HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"})
        assert client_for(server, network=network).call("repos.get")["id"] == 1001
    assert proxy.relayed == [] and len(state.requests) == 1


def _gate_pull_request(tmp_path: Path, server: GitHubServer, env: dict[str, str]) -> ActionRun:
    return run_action(
        tmp_path,
        server.url,
        event_name="pull_request",
        event=pull_request_event(),
        inputs={"candidate": "candidate"},
        extra_env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("ca_variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_action_reaches_github_through_an_authenticating_proxy_with_a_private_ca(
    tmp_path: Path, ca: PrivateCA, ca_variable: str
) -> None:
    state = _pull_request_world(tmp_path)
    with (
        ProxyServer(require_auth=("runner", "s3cret")) as proxy,
        GitHubServer(state, tls=ca.server_context()) as server,
    ):
        proxy_url = proxy.url.replace("http://", "http://runner:s3cret@")
        env = {"HTTPS_PROXY": proxy_url, ca_variable: str(ca.ca_file), "NO_PROXY": "pipeline.internal"}
        result = _gate_pull_request(tmp_path, server, env)
    assert result.returncode == 0, result.stderr
    assert result.outputs["decision"] == "pass"
    assert len(state.comments[7]) == 1 and len(state.check_runs) == 1
    assert len(state.blob_requests) == 1  # the baseline's zip, from blob storage, also proxied
    # Every request the API and the blob storage received came through a tunnel of the proxy.
    assert set(state.client_ports) <= proxy.upstream_ports
    assert {r["method"] for r in proxy.relayed} == {"CONNECT"}
    api_port, blob_port = server.url.rsplit(":", 1)[1], server.blob_url.rsplit(":", 1)[1]
    assert {r["target"] for r in proxy.relayed} == {f"127.0.0.1:{api_port}", f"127.0.0.1:{blob_port}"}
    assert proxy.refused == 0
    assert "s3cret" not in result.stdout + result.stderr


@pytest.mark.slow
def test_without_the_ca_bundle_tls_to_github_fails_with_one_line(tmp_path: Path, ca: PrivateCA) -> None:
    state = _pull_request_world(tmp_path)
    with GitHubServer(state, tls=ca.server_context()) as server:
        result = _gate_pull_request(tmp_path, server, {})
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("ragproof: error:")]
    assert errors == [
        f"ragproof: error: GitHub API repos.get: cannot reach {server.url} (SSLError): its TLS certificate "
        "is not trusted; for a private CA set REQUESTS_CA_BUNDLE or SSL_CERT_FILE to the CA bundle"
    ]
    assert state.requests == []


def test_an_untrusted_certificate_is_not_retried(ca: PrivateCA) -> None:
    """Each attempt is a TCP connection to this listener; a certificate fails the same way every
    time, so the client gives up after the first (a 5xx or a dropped connection is retried)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    listener.settimeout(0.1)
    connections: list[int] = []
    done = threading.Event()

    def serve() -> None:
        context = ca.server_context()
        while not done.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            connections.append(1)
            with contextlib.suppress(OSError), context.wrap_socket(sock, server_side=True):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{listener.getsockname()[1]}"
    client = GitHubClient(api_url=url, repository="acme/rag", token="t", backoff_factor=0.01)
    try:
        with pytest.raises(GitHubAPIError) as caught:
            client.call("repos.get")
    finally:
        done.set()
        thread.join(5)
        listener.close()
    assert str(caught.value).startswith(f"GitHub API repos.get: cannot reach {url} (SSLError): its TLS")
    assert len(connections) == 1


# -- the judge client ------------------------------------------------------------------------


def _judge(base_url: str, tmp_path: Path, variables: dict[str, str]) -> JudgeSession:
    env = Environment(variables={"OPENAI_API_KEY": "sk-test-judge", **variables}, cwd=tmp_path)
    session = build_judge(judge_config(base_url, retries=0), env, tmp_path / "store.sqlite", False)
    assert session is not None
    return session


def test_judge_goes_through_https_proxy_and_trusts_the_ca_bundle(
    tmp_path: Path, ca: PrivateCA, proxy: ProxyServer
) -> None:
    with JudgeServer(tls=ca.server_context()) as server:
        server.script(reply(VERDICT), reply(VERDICT))
        session = _judge(
            server.openai_url, tmp_path, {"HTTPS_PROXY": proxy.url, "REQUESTS_CA_BUNDLE": str(ca.ca_file)}
        )
        verdict = session.ask("refusal", QUESTION)
        assert verdict.reply_as(RefusalReply).declined is True
        assert server.count == 1
        assert set(server.client_ports) <= proxy.upstream_ports
        assert [r["method"] for r in proxy.relayed] == ["CONNECT"]
        assert proxy.relayed[0]["target"] == server.url.removeprefix("https://")


def test_judge_over_http_proxy_and_no_proxy(tmp_path: Path, proxy: ProxyServer) -> None:
    with JudgeServer() as server:
        server.script(reply(VERDICT), reply(VERDICT))
        _judge(server.openai_url, tmp_path, {"http_proxy": proxy.url}).ask("refusal", QUESTION)
        assert [r["method"] for r in proxy.relayed] == ["POST"]
        assert proxy.relayed[0]["target"] == server.openai_url + "/chat/completions"
        assert set(server.client_ports) <= proxy.upstream_ports
        _judge(
            server.openai_url, tmp_path / "direct", {"http_proxy": proxy.url, "no_proxy": "127.0.0.1"}
        ).ask("refusal", {**QUESTION, "answer": "No."})
        assert len(proxy.relayed) == 1 and server.count == 2


def test_judge_without_the_ca_bundle_is_a_judge_error(tmp_path: Path, ca: PrivateCA) -> None:
    with JudgeServer(tls=ca.server_context()) as server:
        with pytest.raises(
            JudgeError, match=r"^judge request to https://127\.0\.0\.1:\d+/v1/chat/completions failed"
        ):
            _judge(server.openai_url, tmp_path, {}).ask("refusal", QUESTION)
        assert server.count == 0


def test_the_pipeline_keeps_the_proxy_settings_of_its_environment() -> None:
    # A pipeline's own HTTP clients read the same variables: they reach it unchanged (only
    # credentials are withheld).
    from gate.boundary.secrets import pipeline_environment

    settings = {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "x", "SSL_CERT_FILE": "/c"}
    assert pipeline_environment({**settings, "GITHUB_TOKEN": "t"}, None) == settings


# -- the http pipeline adapter ---------------------------------------------------------------


def test_http_adapter_trusts_the_ca_bundle_and_connects_directly(
    tmp_path: Path, ca: PrivateCA, proxy: ProxyServer
) -> None:
    with PipelineServer(tls=ca.server_context()) as server:
        config = parse_config(
            {"dataset": "cases.jsonl", "adapter": {"type": "http", "url": server.url, "retries": 0}},
            tmp_path / "ragproof.yaml",
        )
        trusted = Environment(
            variables={"REQUESTS_CA_BUNDLE": str(ca.ca_file), "HTTPS_PROXY": proxy.url}, cwd=tmp_path
        )
        out = run_one_case(build_adapter(config, trusted, tmp_path), "ok: over tls", 2)
        assert out.answer is not None and out.answer.text == "answer: ok: over tls"
        assert proxy.relayed == []  # the pipeline is reached directly, never through the proxy
        untrusted = build_adapter(config, Environment(variables={}, cwd=tmp_path), tmp_path)
        with pytest.raises(
            AdapterError, match=r"^POST /retrieve: cannot connect \(SSLCertVerificationError\)$"
        ):
            run_one_case(untrusted, "ok: unknown ca", 2)
