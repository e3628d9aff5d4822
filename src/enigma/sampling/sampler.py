"""Target-action sampling: what the agent under evaluation would say at every logged agent
turn, ``a'_t ~ pi(s_t)`` with ``s_t = turns[:t]``.

Samples are cached per agent fingerprint and keyed by state hash, sample index and seed, so a
rerun asks the agent nothing, an interrupted run resumes where it stopped, and a changed agent
(new fingerprint) is sampled afresh. A failed call is recorded in the ``error`` column of its
state and the run goes on; a long run of failures stops it (the agent is down).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa

from enigma.agents import AgentSettings, approximation_label, fingerprint, load_agent, state_hash
from enigma.agents.errors import AgentCallError
from enigma.contracts import Turn
from enigma.sampling.cache import SampleCache
from enigma.store.experience import ExperienceStore

log = logging.getLogger(__name__)

OUTPUT_SCHEMA = pa.schema(
    [
        pa.field("dialog_id", pa.string()),
        pa.field("turn_index", pa.int32()),
        pa.field("sample_index", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("agent_fingerprint", pa.string()),
        pa.field("state_hash", pa.string()),
        pa.field("seed", pa.int64()),
        pa.field("error", pa.string()),
    ]
)

MAX_ERROR_CHARS = 500


class SamplingAborted(RuntimeError):
    """Too many consecutive failures: the agent looks down. What was sampled is on disk."""


@dataclass
class SamplingStats:
    agent_fingerprint: str
    n_states: int = 0  # agent turns in scope
    n_unique_states: int = 0
    n_cached: int = 0  # unique states answered from the cache
    n_called: int = 0  # unique states sent to the agent this run
    n_failed: int = 0  # of those, states with at least one failed sample
    seconds: float = 0.0

    @property
    def states_per_second(self) -> float:
        return self.n_called / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["states_per_second"] = round(self.states_per_second, 3)
        return d


@dataclass(frozen=True)
class _State:
    dialog_id: str
    turn_index: int
    history: tuple[Turn, ...]
    state_hash: str


def call_seed(seed: int, key: str) -> int:
    """Per-state seed: the same state gets the same draw whatever the order of the run."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:4], "big") & 0x7FFFFFFF


def logged_agent_states(store: ExperienceStore, exclude_agents: Iterable[str] = ()) -> list[_State]:
    """Every agent turn of every dialogue (dialogue order, then turn order), without the
    dialogues of ``exclude_agents``."""
    exclude = set(exclude_agents)
    if exclude:
        unknown = exclude - set(store.agents())
        if unknown:
            log.warning("exclude_agents: %s not in the store (agents: %s)", sorted(unknown), store.agents())
        store = store.filter_agents(drop=exclude)
    states = []
    for dialog_id, turns in store.histories().items():
        for t, turn in enumerate(turns):
            if turn.role == "agent":
                history = tuple(turns[:t])
                states.append(_State(dialog_id, t, history, state_hash(history)))
    return states


def _clean_error(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}"
    return msg if len(msg) <= MAX_ERROR_CHARS else msg[: MAX_ERROR_CHARS - 3] + "..."


def sample_targets(store: ExperienceStore | str | Path, agent_spec: str, **options: Any) -> pa.Table:
    """Sample the agent's replies at every logged agent turn of ``store``: ``run_sampling``
    (same options: ``n_samples``, ``seed``, ``cache_dir``, ``exclude_agents``, ``agent``, ...)
    without its run statistics.

    Returns one row per (dialog_id, turn_index, sample_index) with the columns of
    ``OUTPUT_SCHEMA``; ``text`` is null and ``error`` says why where a sample failed. The
    schema metadata carries the spec, the fingerprint, the run's statistics and, for the
    transcript stand-ins, the approximation label.
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
    max_consecutive_errors: int = 20,
    retry_errors: bool = True,
    progress: bool = True,
) -> tuple[pa.Table, SamplingStats]:
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if not isinstance(store, ExperienceStore):
        store = ExperienceStore.open(store)
    if agent is None:
        agent = load_agent(agent_spec, settings)
    fp = fingerprint(agent_spec, agent)
    cache = SampleCache(cache_dir, fp)
    label = approximation_label(agent_spec)
    cache.write_info({"spec": agent_spec, "agent_fingerprint": fp, "approximation": label})

    # Table agents answer by (dialog, turn); the others by history alone, so identical
    # states (e.g. every opening) share one call.
    keyed = callable(getattr(agent, "respond_at", None))

    def key_of(st: _State) -> str:
        return f"{st.dialog_id}\x1f{st.turn_index}\x1f{st.state_hash}" if keyed else st.state_hash

    def row_key(row: dict) -> str:
        return (
            f"{row['dialog_id']}\x1f{row['turn_index']}\x1f{row['state_hash']}" if keyed else row["state_hash"]
        )

    states = logged_agent_states(store, exclude_agents)
    stats = SamplingStats(fp, n_states=len(states))

    cached: dict[tuple[str, int], dict] = {}
    for row in cache.read():
        if row["seed"] == seed and row["sample_index"] < n_samples:
            cached[(row_key(row), row["sample_index"])] = row

    unique: dict[str, _State] = {}
    for st in states:
        unique.setdefault(key_of(st), st)
    stats.n_unique_states = len(unique)

    def done(k: str, i: int) -> bool:
        row = cached.get((k, i))
        return row is not None and (row["error"] is None or not retry_errors)

    pending = [st for k, st in unique.items() if not all(done(k, i) for i in range(n_samples))]
    stats.n_cached = len(unique) - len(pending)

    def ask(st: _State) -> list[dict]:
        k = key_of(st)
        missing = [i for i in range(n_samples) if not done(k, i)]
        s = call_seed(seed, k)
        base = {
            "dialog_id": st.dialog_id,
            "turn_index": st.turn_index,
            "state_hash": st.state_hash,
            "seed": seed,
            "agent_fingerprint": fp,
        }
        try:
            if keyed:
                replies = agent.respond_at(st.dialog_id, st.turn_index, list(st.history), n=n_samples, seed=s)
            else:
                replies = agent.respond(list(st.history), n=n_samples, seed=s)
            if not isinstance(replies, (list, tuple)):
                raise AgentCallError(f"agent returned {type(replies).__name__}, expected a list of strings")
        except Exception as exc:  # recorded for this state; the run goes on
            err = _clean_error(exc)
            return [dict(base, sample_index=i, text=None, error=err) for i in missing]
        out = []
        for i in missing:
            if i >= len(replies):
                out.append(dict(base, sample_index=i, text=None, error=f"agent returned {len(replies)} replies, {n_samples} requested"))
            elif not isinstance(replies[i], str):
                out.append(dict(base, sample_index=i, text=None, error=f"reply is {type(replies[i]).__name__}, not a string"))
            elif not replies[i].strip():
                out.append(dict(base, sample_index=i, text=None, error="empty reply"))
            else:
                out.append(dict(base, sample_index=i, text=replies[i], error=None))
        return out

    prepare = getattr(agent, "prepare", None)
    if pending and callable(prepare):
        # Agents that can batch work across states (e.g. embedding every context at once) do
        # it here; a failure only costs that speed-up, the per-state calls report their errors.
        try:
            prepare([list(st.history) for st in pending])
        except Exception as exc:
            log.warning("sampling %s: prepare() failed, going on state by state (%s)", agent_spec, _clean_error(exc))

    concurrency = max(1, int(getattr(agent, "concurrency", 1) or 1))
    buffer: list[dict] = []
    consecutive = 0
    t0 = time.perf_counter()
    bar = None
    if pending:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pending), desc=f"sampling {fp[:8]}", unit="state", disable=not progress)
        if stats.n_cached:
            log.info("sampling %s: %d of %d states already cached", agent_spec, stats.n_cached, len(unique))

    def flush() -> None:
        if buffer:
            cache.append(buffer)
            for row in buffer:
                cached[(row_key(row), row["sample_index"])] = row
            buffer.clear()

    pool = ThreadPoolExecutor(max_workers=concurrency) if concurrency > 1 else None
    try:
        for start in range(0, len(pending), chunk_states):
            chunk = pending[start : start + chunk_states]
            results = pool.map(ask, chunk) if pool else map(ask, chunk)
            for rows in results:
                stats.n_called += 1
                failed = any(r["error"] is not None for r in rows)
                stats.n_failed += failed
                consecutive = consecutive + 1 if failed else 0
                buffer.extend(rows)
                if bar is not None:
                    bar.update(1)
                    elapsed = time.perf_counter() - t0
                    bar.set_postfix(failed=stats.n_failed, rate=f"{stats.n_called / max(elapsed, 1e-9):.2f}/s")
                if consecutive >= max_consecutive_errors:
                    raise SamplingAborted(
                        f"sampling {agent_spec}: {consecutive} states failed in a row, stopping "
                        f"(last error: {rows[-1]['error']}); {stats.n_called - consecutive} states "
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
            "sampling %s: %d states asked in %.1fs (%.2f states/s), %d failed, %d from cache",
            agent_spec, stats.n_called, stats.seconds, stats.states_per_second, stats.n_failed, stats.n_cached,
        )

    columns: dict[str, list] = {name: [] for name in OUTPUT_SCHEMA.names}
    for st in states:
        k = key_of(st)
        for i in range(n_samples):
            row = cached.get((k, i))
            if row is None:  # cannot happen unless the cache was removed mid-run
                raise RuntimeError(f"sampling {agent_spec}: no cached sample for dialog {st.dialog_id!r} turn {st.turn_index} sample {i}")
            columns["dialog_id"].append(st.dialog_id)
            columns["turn_index"].append(st.turn_index)
            columns["sample_index"].append(i)
            columns["text"].append(row["text"])
            columns["agent_fingerprint"].append(fp)
            columns["state_hash"].append(st.state_hash)
            columns["seed"].append(seed)
            columns["error"].append(row["error"])
    meta = {
        "enigma.sampling.spec": agent_spec,
        "enigma.sampling.agent_fingerprint": fp,
        "enigma.sampling.stats": json.dumps(stats.as_dict()),
    }
    if label:
        meta["enigma.sampling.approximation"] = label
    table = pa.Table.from_pydict(columns, schema=OUTPUT_SCHEMA).replace_schema_metadata(meta)
    return table, stats
