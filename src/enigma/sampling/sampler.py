"""Target-action sampling: what the agent under evaluation would say at every logged agent
turn, ``a'_t ~ pi(s_t)`` with ``s_t = turns[:t]``.

Every logged occurrence of a state gets its own draws: a stochastic agent is a distribution
over replies, and two dialogues that reach the same history are two visits of that state (in
See 2019 half the chats are opened by the bot from the same empty history). The occurrences of
one state are still asked for in few calls (``plan_calls``). An agent that declares
``deterministic = True`` is asked once per distinct state; a table of replies is asked per
occurrence by key.

Samples are cached per agent fingerprint, keyed by occurrence (or state, for a deterministic
agent), sample index and seed, so a rerun asks the agent nothing, an interrupted run resumes
where it stopped with the draws it would have made, and a changed agent (new fingerprint) is
sampled afresh. A failed call is recorded in the ``error`` column of its rows and the run goes
on; a long run of failures stops it (the agent is down), and so does a run in which every call
failed (too short for that run of failures). An empty reply is a reply, not a failure: it is what
an early checkpoint of a model says, and the estimate scores it as said
(``enigma.sampling.degenerate`` counts it and the estimate reports the share).
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa

from enigma.agents import AgentSettings, approximation_label, fingerprint, load_agent, shown_spec
from enigma.agents.errors import AgentCallError, AgentUnavailable
from enigma.agents.isolated import AgentProcessLost, IsolatedPythonAgent
from enigma.sampling.cache import SampleCache
from enigma.sampling.plan import (Call, LoggedState, draw_mode, logged_agent_states, occurrence_key,
                                  plan_calls)
from enigma.sampling.targets_table import schema_of, target_columns
from enigma.store.experience import ExperienceStore
from enigma.store.readers.base import storable, unicode_problem

log = logging.getLogger(__name__)

MAX_ERROR_CHARS = 500

class SamplingAborted(AgentUnavailable):
    """Too many consecutive failures, or not one reply in a run: the agent looks down. What was
    sampled is on disk."""


# how one run went (cache hits, calls sent and failed, time): logged and returned, kept out of the
# written table (its `error` column says which samples failed)
RUN_ONLY = ("n_cached", "n_called", "n_failed", "seconds")


@dataclass
class SamplingStats:
    agent_fingerprint: str
    draws: str = "occurrence"  # the DrawMode of the run
    n_states: int = 0  # agent turns in scope: logged state occurrences
    n_unique_states: int = 0  # distinct histories among them
    n_calls: int = 0  # agent calls that cover them all
    n_cached: int = 0  # of those, answered from the cache
    n_called: int = 0  # of those, sent to the agent this run
    n_failed: int = 0  # of those, calls with at least one failed sample
    seconds: float = 0.0

    @property
    def calls_per_second(self) -> float:
        return self.n_called / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["calls_per_second"] = round(self.calls_per_second, 3)
        return d

    def of_the_sample(self) -> dict[str, Any]:
        """What was sampled, not how this run went: the same for a rerun from the cache, so a
        file that carries it is a function of its inputs (DVC hashes the sample stage's files)."""
        return {k: v for k, v in asdict(self).items() if k not in RUN_ONLY}


def _clean_error(exc: BaseException) -> str:
    # an agent's exception may quote text Parquet cannot hold (a lone surrogate)
    msg = storable(f"{type(exc).__name__}: {exc}")
    return msg if len(msg) <= MAX_ERROR_CHARS else msg[: MAX_ERROR_CHARS - 3] + "..."


def sample_targets(store: ExperienceStore | str | Path, agent_spec: str, **options: Any) -> pa.Table:
    """Sample the agent's replies at every logged agent turn of ``store``: ``run_sampling``
    (same options: ``n_samples``, ``seed``, ``cache_dir``, ``exclude_agents``, ``agent``, ...)
    without its run statistics.

    Returns one row per (dialog_id, turn_index, sample_index) with the columns of ``OUTPUT_SCHEMA``
    (``enigma.sampling.targets_table``); ``text`` is null and ``error`` says why where a sample
    failed. The schema metadata carries the spec, the fingerprint, what was sampled (``SamplingStats.of_the_sample``:
    states and calls; not this run's cache hits, failures or time) and, for the transcript stand-ins,
    the approximation label.
    """
    return run_sampling(store, agent_spec, **options)[0]


def run_sampling(
    store: ExperienceStore | str | Path,
    agent_spec: str,
    *,
    n_samples: int = 1,
    seed: int = 0,
    cache_dir: str | Path = "cache/samples",
    exclude_agents: Iterable[str] = (),
    agent: Any = None,
    settings: AgentSettings | None = None,
    chunk_states: int = 32,
    max_replies_per_call: int = 64,
    max_consecutive_errors: int = 20,
    retry_errors: bool = True,
    progress: bool = True,
) -> tuple[pa.Table, SamplingStats]:
    """``chunk_states``: calls per cache part (what a crash can lose at most);
    ``max_replies_per_call``: how many occurrences of one state a call may cover (x n)."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if not isinstance(store, ExperienceStore):
        store = ExperienceStore.open(store)
    if agent is not None:
        return _run_sampling(store, agent_spec, agent, n_samples=n_samples, seed=seed, cache_dir=cache_dir,
                             exclude_agents=exclude_agents, chunk_states=chunk_states,
                             max_replies_per_call=max_replies_per_call, max_consecutive_errors=max_consecutive_errors,
                             retry_errors=retry_errors, progress=progress)
    # a python: agent runs in a process of its own (sample.agents.python), stopped when the run ends
    agent = load_agent(agent_spec, settings, isolate=True)
    try:
        return _run_sampling(store, agent_spec, agent, n_samples=n_samples, seed=seed, cache_dir=cache_dir,
                             exclude_agents=exclude_agents, chunk_states=chunk_states,
                             max_replies_per_call=max_replies_per_call, max_consecutive_errors=max_consecutive_errors,
                             retry_errors=retry_errors, progress=progress)
    finally:
        if isinstance(agent, IsolatedPythonAgent):
            agent.close()


def _run_sampling(store: ExperienceStore, agent_spec: str, agent: Any, *, n_samples: int, seed: int,
                  cache_dir: str | Path, exclude_agents: Iterable[str], chunk_states: int, max_replies_per_call: int,
                  max_consecutive_errors: int, retry_errors: bool, progress: bool) -> tuple[pa.Table, SamplingStats]:
    shown = shown_spec(agent_spec)  # credentials in a URL hidden: this goes into messages, logs, the cache, the table
    fp = fingerprint(agent_spec, agent)
    cache = SampleCache(cache_dir, fp)
    label = approximation_label(agent_spec)
    cache.write_info({"spec": shown, "agent_fingerprint": fp, "approximation": label})
    mode = draw_mode(agent)
    sourced = bool(getattr(agent, "records_sources", False))
    # Rows cached before draws were per occurrence carry no draw mode: per occurrence for a
    # table, per state otherwise (a stochastic agent's old rows are not reused: one draw per state).
    legacy = "occurrence" if mode == "keyed" else "state"
    row_draw = "state" if mode == "state" else "occurrence"

    def key_of(st: LoggedState) -> str:
        return st.state_hash if mode == "state" else occurrence_key(st.dialog_id, st.turn_index, st.state_hash)

    states = logged_agent_states(store, exclude_agents)
    calls = plan_calls(states, n_samples, seed, mode, max_replies_per_call)
    stats = SamplingStats(fp, draws=mode, n_states=len(states), n_unique_states=len({st.state_hash for st in states}),
                          n_calls=len(calls))

    # A per-occurrence row is reused only by the store whose occurrences drew it (rows cached
    # before the group column are, as before, reused by any store).
    group_of = {key_of(st): c.group for c in calls if c.group is not None for st in c.occurrences}
    cached: dict[tuple[str, int], dict] = {}
    for row in cache.read():
        if row["seed"] == seed and row["sample_index"] < n_samples and (row.get("draw") or legacy) == row_draw:
            k = row["state_hash"] if mode == "state" else occurrence_key(row["dialog_id"], row["turn_index"], row["state_hash"])
            if row.get("group") is not None and row["group"] != group_of.get(k):
                continue
            cached[(k, row["sample_index"])] = row

    def done(k: str, i: int) -> bool:
        row = cached.get((k, i))
        return row is not None and (row["error"] is None or not retry_errors)

    def receivers(call: Call) -> tuple[LoggedState, ...]:
        return (call.state,) if call.shared else call.occurrences

    pending = [c for c in calls if not all(done(key_of(st), i) for st in receivers(c) for i in range(n_samples))]
    stats.n_cached = len(calls) - len(pending)

    def want(call: Call) -> int:
        return n_samples * len(receivers(call))

    def request(call: Call) -> tuple[str, tuple, dict]:
        """The agent method, arguments and keywords of ``call``."""
        st = call.state
        if mode == "keyed":
            return "respond_at", (st.dialog_id, st.turn_index, list(st.history)), {"n": want(call), "seed": call.seed}
        return ("respond_with_sources" if sourced else "respond"), (list(st.history),), {"n": want(call), "seed": call.seed}

    def asked(call: Call) -> Callable[[], Any]:
        """``call`` made in this process, when its rows are made."""
        name, args, kwargs = request(call)
        return lambda: getattr(agent, name)(*args, **kwargs)

    def ask(call: Call, answer: Callable[[], Any]) -> list[dict]:
        """The rows of ``call`` from ``answer()``: what the agent returned, or raised."""
        sources: list = []
        try:
            replies = answer()
            if sourced and mode != "keyed":
                pairs = replies
                replies, sources = [reply for reply, _ in pairs], [source for _, source in pairs]
        except AgentProcessLost:  # its process died or hangs: no later call can be answered
            raise
        except Exception as exc:  # recorded for this call's rows; the run goes on
            return rows_of(call, None, exc)
        return rows_of(call, replies, None, sources)

    def rows_of(call: Call, replies: Any, exc: BaseException | None, sources: list | None = None,
                limits: list | None = None) -> list[dict]:
        """The cache rows of ``call``'s missing samples, from its replies or its failure."""
        to = receivers(call)
        missing = [(j, occ, i) for j, occ in enumerate(to) for i in range(n_samples) if not done(key_of(occ), i)]

        def row(occ: LoggedState, i: int, text: str | None, error: str | None, source: str | None = None,
                cut: bool | None = None) -> dict:
            return {"dialog_id": occ.dialog_id, "turn_index": occ.turn_index, "state_hash": occ.state_hash, "seed": seed,
                    "agent_fingerprint": fp, "draw": row_draw, "group": call.group, "sample_index": i, "text": text,
                    "error": error, "source_context": source, "at_token_limit": cut}

        if exc is None and not isinstance(replies, (list, tuple)):
            exc = AgentCallError(f"agent returned {type(replies).__name__}, expected a list of strings")
        if exc is not None:
            err = _clean_error(exc)
            return [row(occ, i, None, err) for _, occ, i in missing]
        out = []
        for j, occ, i in missing:
            r = i * len(to) + j
            if r >= len(replies):
                out.append(row(occ, i, None, f"agent returned {len(replies)} replies, {want(call)} requested"))
            elif not isinstance(replies[r], str):
                out.append(row(occ, i, None, f"reply is {type(replies[r]).__name__}, not a string"))
            elif problem := unicode_problem(replies[r]):  # Parquet cannot hold it: the sample fails, not the run
                out.append(row(occ, i, None, f"reply is {problem}"))
            else:
                out.append(row(occ, i, replies[r], None, sources[r] if sources else None,
                               bool(limits[r]) if limits and r < len(limits) else None))
        return out

    # An agent with respond_batch (hf:) is handed a chunk's calls at once; each call keeps its
    # seed, and the agent draws every reply from that seed alone, so the batch changes no draw.
    batched = mode != "keyed" and not sourced and callable(getattr(agent, "respond_batch", None))
    limited = batched and bool(getattr(agent, "records_token_limit", False))

    def ask_chunk(chunk: list[Call]) -> Iterable[list[dict]]:
        if isinstance(agent, IsolatedPythonAgent):  # the chunk's calls sent at once, answered one by one
            return map(ask, chunk, agent.answers([request(c) for c in chunk]))
        if not batched:
            return pool.map(lambda c: ask(c, asked(c)), chunk) if pool else (ask(c, asked(c)) for c in chunk)
        try:
            answers = agent.respond_batch([list(c.state.history) for c in chunk], [want(c) for c in chunk],
                                          [c.seed for c in chunk], **({"with_limit": True} if limited else {}))
            if not isinstance(answers, (list, tuple)) or len(answers) != len(chunk):
                raise AgentCallError(f"respond_batch returned {type(answers).__name__} "
                                     f"of {len(answers) if isinstance(answers, (list, tuple)) else '?'} answers, "
                                     f"{len(chunk)} calls asked")
        except Exception as exc:  # the calls one by one, so that each records its own error
            log.warning("sampling %s: respond_batch failed, asking its %d calls one by one (%s)", shown,
                        len(chunk), _clean_error(exc))
            return (ask(c, asked(c)) for c in chunk)
        if limited:
            return [limited_rows(c, a) for c, a in zip(chunk, answers)]
        return [rows_of(c, a, None) for c, a in zip(chunk, answers)]

    def limited_rows(call: Call, answer: Any) -> list[dict]:
        """The rows of one call's ``(reply, cut)`` pairs; a malformed answer fails that call only."""
        if not isinstance(answer, (list, tuple)):
            return rows_of(call, None, AgentCallError(
                f"respond_batch(with_limit=True) answered {type(answer).__name__}, expected a list of (reply, cut) pairs"))
        bad = next((i for i, p in enumerate(answer) if not (isinstance(p, (list, tuple)) and len(p) == 2)), None)
        if bad is not None:  # say which item, and what it was: "answered list" hid where the shape broke
            return rows_of(call, None, AgentCallError(
                f"respond_batch(with_limit=True) answered item {bad} of {len(answer)} as {type(answer[bad]).__name__} "
                f"{str(answer[bad])[:40]!r}, expected a list of (reply, cut) pairs"))
        return rows_of(call, [text for text, _ in answer], None, limits=[cut for _, cut in answer])

    def chunks() -> Iterable[list[Call]]:
        """``chunk_states`` calls per cache part; for a batching agent, also enough calls to
        fill one of its batches (``batch_size`` replies), so that no generate call runs short."""
        fill = max(1, int(getattr(agent, "batch_size", 1) or 1)) if batched else 1
        chunk: list[Call] = []
        replies = 0
        for c in pending:
            chunk.append(c)
            replies += want(c)
            if len(chunk) >= chunk_states and replies >= fill:
                yield chunk
                chunk, replies = [], 0
        if chunk:
            yield chunk

    prepare = getattr(agent, "prepare", None)
    if pending and callable(prepare):
        # Agents that can batch work across states (e.g. embedding every context at once) do
        # it here; a failure only costs that speed-up, the per-state calls report their errors.
        try:
            prepare([list(c.state.history) for c in pending])
        except AgentProcessLost:
            raise
        except Exception as exc:
            log.warning("sampling %s: prepare() failed, going on call by call (%s)", shown, _clean_error(exc))

    concurrency = max(1, int(getattr(agent, "concurrency", 1) or 1))
    buffer: list[dict] = []
    consecutive = 0
    last_error = None
    t0 = time.perf_counter()
    bar = None
    if pending:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pending), desc=f"sampling {fp[:8]}", unit="call", disable=not progress)
        if stats.n_cached:
            log.info("sampling %s: %d of %d calls already cached", shown, stats.n_cached, len(calls))

    def flush() -> None:
        if buffer:
            cache.append(buffer)
            for r in buffer:
                st = LoggedState(r["dialog_id"], r["turn_index"], (), r["state_hash"])
                cached[(key_of(st), r["sample_index"])] = r
            buffer.clear()

    pool = ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else None
    try:
        for chunk in chunks():
            for rows in ask_chunk(chunk):
                stats.n_called += 1
                failed = any(r["error"] is not None for r in rows)
                stats.n_failed += failed
                consecutive = consecutive + 1 if failed else 0
                last_error = next((r["error"] for r in reversed(rows) if r["error"] is not None), last_error)
                buffer.extend(rows)
                if bar is not None:
                    bar.update(1)
                    elapsed = time.perf_counter() - t0
                    bar.set_postfix(failed=stats.n_failed, rate=f"{stats.n_called / max(elapsed, 1e-9):.2f}/s")
                if consecutive >= max_consecutive_errors:
                    raise SamplingAborted(
                        f"agent {shown}: {consecutive} calls failed in a row, stopping "
                        f"(last error: {rows[-1]['error']}); {stats.n_called - consecutive} calls "
                        f"of this run are cached in {cache.dir}, rerun to resume"
                    )
            flush()
    finally:
        flush()  # whatever was sampled before an interruption is kept
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
        stats.seconds = time.perf_counter() - t0

    if stats.n_called:
        log.info(
            "sampling %s: %d calls in %.1fs (%.2f calls/s), %d failed, %d from cache",
            shown, stats.n_called, stats.seconds, stats.calls_per_second, stats.n_failed, stats.n_cached,
        )

    def row_at(st: LoggedState, i: int) -> dict:
        row = cached.get((key_of(st), i))
        if row is None:  # cannot happen unless the cache was removed mid-run
            raise RuntimeError(f"sampling {shown}: no cached sample for dialog {st.dialog_id!r} turn {st.turn_index} sample {i}")
        return row

    columns = target_columns(states, n_samples, row_at, fp, seed, sourced=sourced, limited=limited)
    if stats.n_called and all(text is None for text in columns["text"]):
        # too few calls to reach max_consecutive_errors, yet not one reply: the agent is unusable,
        # and a table of failures would only be estimated on as if it were a result
        raise SamplingAborted(
            f"agent {shown}: all {stats.n_called} calls of this run failed and no reply was sampled "
            f"(last error: {last_error}); rerun once the agent answers"
        )
    meta = {
        "enigma.sampling.spec": shown,
        "enigma.sampling.agent_fingerprint": fp,
        "enigma.sampling.stats": json.dumps(stats.of_the_sample()),
    }
    if label:
        meta["enigma.sampling.approximation"] = label
    table = pa.Table.from_pydict(columns, schema=schema_of(sourced, limited)).replace_schema_metadata(meta)
    return table, stats
