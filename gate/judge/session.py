"""The judge session a run scores with: prompts, client, cache, concurrency and cost in one place.

``build_judge`` is what the runner calls; it returns None when no judge model is configured,
and judge metrics then skip with the registry's reason. A session is shared by the runner's
worker threads: HTTP calls are bounded by ``judge.concurrency`` (a semaphore), totals and the
budget are guarded by a lock, and the cache opens one SQLite connection per thread.

One judge task (``ask``):
1. render the task's template; the key is (model, prompt sha256, input sha256);
2. a verdict (or failure) already obtained in this session for the same key is reused
   (metrics that share a prompt, e.g. groundedness and context precision, make one call; a
   composite recomputing a component makes none), else the store cache is consulted (unless
   ``--no-cache``);
3. otherwise: budget check, call, validate; on an invalid reply exactly one repair call with
   the validation error appended; a second invalid reply raises JudgeError;
4. a validated verdict is written to the cache (not under ``--no-cache``: the cache is not touched).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from gate.core.environment import Environment
from gate.core.errors import JudgeError, UsageError
from gate.core.network import NetworkSettings
from gate.judge.cache import CachedVerdict, JudgeCache
from gate.judge.client import ChatClient, Message, canonical_json, estimate_tokens, make_client
from gate.judge.cost import EXPECTED_OUTPUT_TOKENS, CostMeter, check_budget_configuration
from gate.judge.replies import REPLY_MODELS, RefusalReply, ReplyError, parse_reply
from gate.judge.templates import REPAIR_TEMPLATE, SYSTEM_TEMPLATE, PromptSet
from gate.model.artifact import CostInfo, JudgeInfo
from gate.model.config import JudgeConfig
from gate.model.dataset import Case
from gate.model.records import CaseOutput

_Reply = TypeVar("_Reply", bound=BaseModel)


@dataclass(frozen=True)
class Verdict:
    """A validated judge reply and the record kept in the row's ``judge`` field."""

    reply: BaseModel
    record: dict[str, Any]

    def reply_as(self, kind: type[_Reply]) -> _Reply:
        """The reply as the model its task validates to (TypeError for any other)."""
        if not isinstance(self.reply, kind):
            raise TypeError(f"judge reply is {type(self.reply).__name__}, not {kind.__name__}")
        return self.reply


class JudgeSession:
    """A configured judge: ``ask(task, inputs)`` and the run-level ``info()`` / ``cost()``."""

    def __init__(
        self,
        config: JudgeConfig,
        client: ChatClient,
        *,
        cache: JudgeCache | None = None,
        use_cache: bool = True,
        prompts: PromptSet | None = None,
    ) -> None:
        if not config.model:
            raise UsageError("judge.model is not set (RAGPROOF_JUDGE_MODEL)")
        check_budget_configuration(config)
        self.config = config
        self.model: str = config.model
        self.client = client
        self.cache = cache
        self.use_cache = use_cache
        self.prompts = prompts or PromptSet()
        self.meter = CostMeter(config)
        self._slots = threading.BoundedSemaphore(config.concurrency)
        # (prompt sha256, input sha256) -> the verdict or failure already obtained in this session
        self._memo: dict[tuple[str, str], Verdict | JudgeError] = {}
        self._memo_lock = threading.Lock()

    # --- run-level records -------------------------------------------------------------

    def info(self) -> JudgeInfo:
        return JudgeInfo(
            provider=self.config.provider,
            model=self.model,
            temperature=self.config.temperature,
            prompts=dict(self.prompts.hashes),
        )

    def cost(self) -> CostInfo:
        return self.meter.snapshot()

    def close(self) -> None:
        self.client.close()
        if self.cache is not None:
            self.cache.close()

    # --- judge tasks --------------------------------------------------------------------

    def ask(self, task: str, inputs: dict[str, Any]) -> Verdict:
        """The validated verdict of ``task`` on ``inputs``.

        Raises JudgeError (transport failure, or invalid twice) and BudgetExceeded.
        """
        prompt_sha = self.prompts.task_sha256(task)
        input_sha = hashlib.sha256(canonical_json(inputs).encode()).hexdigest()
        key = (prompt_sha, input_sha)
        with self._memo_lock:
            shared = self._memo.get(key)
        if isinstance(shared, JudgeError):
            raise JudgeError(str(shared), {**shared.judge, "reused": True, "calls": 0})
        if shared is not None:
            return Verdict(shared.reply, {**shared.record, "reused": True, "calls": 0})
        verdict = self._cached(task, prompt_sha, input_sha) if self.use_cache else None
        if verdict is None:
            try:
                verdict = self._judge(task, inputs, prompt_sha)
            except JudgeError as exc:
                with self._memo_lock:
                    self._memo[key] = exc
                raise
            if self.cache is not None and self.use_cache:
                self.cache.put(
                    self.model,
                    prompt_sha,
                    input_sha,
                    CachedVerdict(
                        verdict.reply.model_dump(mode="json"),
                        verdict.record["judge_raw_json"],
                        verdict.record["input_tokens"],
                        verdict.record["output_tokens"],
                    ),
                )
        with self._memo_lock:
            self._memo[key] = verdict
        return verdict

    def _record(
        self, task: str, prompt_sha: str, raw: list[str], cached: bool, tokens: tuple[int, int]
    ) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": task,
            "prompt_sha256": prompt_sha,
            "cached": cached,
            "calls": 0 if cached else len(raw),
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "judge_raw_json": list(raw),
        }

    def _cached(self, task: str, prompt_sha: str, input_sha: str) -> Verdict | None:
        if self.cache is None:
            return None
        hit = self.cache.get(self.model, prompt_sha, input_sha)
        if hit is None:
            return None
        try:
            reply = REPLY_MODELS[task].model_validate(hit.reply)
        except ValueError:
            return None  # a row written by an incompatible version: judge again
        self.meter.count_cache_hit()
        record = self._record(task, prompt_sha, hit.raw, True, (hit.input_tokens, hit.output_tokens))
        return Verdict(reply, record)

    def _judge(self, task: str, inputs: dict[str, Any], prompt_sha: str) -> Verdict:
        messages = [
            Message("system", self.prompts.render(SYSTEM_TEMPLATE)),
            Message("user", self.prompts.render(task, **inputs)),
        ]
        schema = REPLY_MODELS[task].model_json_schema()
        raw: list[str] = []
        tokens = [0, 0]
        for attempt in (1, 2):
            try:
                completion = self._call(task, messages, schema)
            except JudgeError as exc:
                raise JudgeError(
                    str(exc), self._record(task, prompt_sha, raw, False, (tokens[0], tokens[1]))
                ) from None
            raw.append(completion.text)
            tokens[0] += completion.input_tokens
            tokens[1] += completion.output_tokens
            try:
                reply = parse_reply(task, completion.text)
            except ReplyError as exc:
                if attempt == 2:
                    record = self._record(task, prompt_sha, raw, False, (tokens[0], tokens[1]))
                    raise JudgeError(f"invalid judge reply after one repair retry: {exc}", record) from None
                messages += [
                    Message("assistant", completion.text),
                    Message("user", self.prompts.render(REPAIR_TEMPLATE, error=str(exc))),
                ]
                continue
            return Verdict(reply, self._record(task, prompt_sha, raw, False, (tokens[0], tokens[1])))
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, task: str, messages: list[Message], schema: dict[str, Any]) -> Any:
        projected_in = estimate_tokens("".join(m.content for m in messages))
        reserved = self.meter.reserve(projected_in, EXPECTED_OUTPUT_TOKENS.get(task, 200))
        try:
            with self._slots:
                completion = self.client.complete(messages, schema)
        except BaseException:
            self.meter.release(reserved)
            raise
        self.meter.settle(
            reserved, completion.input_tokens, completion.output_tokens, completion.usage_estimated
        )
        return completion

    # --- the refusal verdict robustness.abstention / overrefusal consult ----------------

    def refusal_verdict(self, case: Case, output: CaseOutput) -> tuple[bool, dict[str, Any]]:
        """(True when the answer declined, the judge record). Raises JudgeError / BudgetExceeded."""
        answer = output.answer.text if output.answer is not None else ""
        verdict = self.ask("refusal", {"question": case.question, "answer": answer})
        return verdict.reply_as(RefusalReply).declined, {
            **verdict.record,
            "verdict": verdict.reply.model_dump(),
        }


def build_judge(
    judge_config: JudgeConfig, env: Environment, store_path: Path, use_cache: bool
) -> JudgeSession | None:
    """The run's judge session, or None when no judge model is configured.

    The key is read from the environment variable ``judge.api_key_env`` names; it is required
    for the providers' own endpoints and optional for a custom ``base_url`` (local models).
    The cache is ``judge.cache_path`` (relative to the working directory) or the run store.
    """
    if not judge_config.model:
        return None
    check_budget_configuration(judge_config)
    if judge_config.temperature != 0:
        raise UsageError(
            f"judge.temperature: must be 0 (judge calls run at temperature 0), got {judge_config.temperature:g}"
        )
    api_key = env.get(judge_config.api_key_env) or None
    if api_key is None and judge_config.base_url is None:
        raise UsageError(
            f"judge: environment variable {judge_config.api_key_env} (judge.api_key_env) is not set; "
            "it holds the judge's API key"
        )
    client = make_client(judge_config, api_key, NetworkSettings.from_variables(env.variables))
    cache = None
    if judge_config.cache:
        path = Path(judge_config.cache_path) if judge_config.cache_path else Path(store_path)
        if not path.is_absolute():
            path = env.cwd / path
        cache = JudgeCache(path)
    return JudgeSession(judge_config, client, cache=cache, use_cache=use_cache)
