"""The transcript stand-ins on See 2019 self-play data, read through the store's
``see2019-selfplay`` reader, with the real MiniLM embedding cache."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from enigma.agents import AgentSpecError, approximation_label, load_agent
from enigma.agents.config import AgentSettings, TranscriptSettings
from enigma.agents.transcripts import context_text
from enigma.dialogue import Turn
from enigma.sampling.sampler import sample_targets
from enigma.store.experience import ExperienceStore
from enigma.store.readers import read

AGENT = "greedy_model"
N_DIALOGUES = 6


def _first(result, n):
    store = ExperienceStore(result.dialogues, result.turns)
    keep = pa_slice_ids(store, n)
    d = store.dialogues.filter(pc.is_in(store.dialogues["dialog_id"], keep))
    t = store.turns.filter(pc.is_in(store.turns["dialog_id"], keep))
    return ExperienceStore(d, t)


def pa_slice_ids(store, n):
    import pyarrow as pa

    by_agent = {}
    for did, agent in zip(store.dialogues["dialog_id"].to_pylist(), store.dialogues["agent_id"].to_pylist()):
        by_agent.setdefault(agent, []).append(did)
    return pa.array([d for ids in by_agent.values() for d in ids[:n]])


@pytest.fixture(scope="module")
def see_stores(raw_data, tmp_path_factory):
    """(self-play store with two bots, human-log store of another bot) as store directories."""
    root = raw_data / "see2019_convai2_humaneval"
    tmp = tmp_path_factory.mktemp("see")
    from pathlib import Path

    from enigma.params import Params

    cfg = Params.load(Path(__file__).resolve().parents[2] / "params.yaml").ingest
    sp_dir = tmp / "selfplay-in"
    sp_dir.mkdir()
    for name in (AGENT, "baseline_model"):
        (sp_dir / f"{name}.jsonl").write_bytes((root / "selfplay_hmjiang" / f"{name}.jsonl").read_bytes())
    selfplay = _first(read("see2019-selfplay", sp_dir, cfg), N_DIALOGUES).write(tmp / "selfplay")
    human = _first(read("see2019", root / "evallog" / "baseline_model.jsonl", cfg), 10).write(tmp / "human")
    return selfplay, human


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return AgentSettings(transcripts=TranscriptSettings(embed_cache_dir=str(tmp_path_factory.mktemp("emb"))))


def test_nearest_context_reply_and_openings(see_stores, settings):
    selfplay, _ = see_stores
    agent = load_agent(f"transcripts:{selfplay}?agent={AGENT}", settings)
    store = ExperienceStore.open(selfplay).filter_agents(keep={AGENT})
    hist = next(iter(store.histories().values()))
    k = settings.transcripts.context_turns
    for t in (1, 4, 7):
        same = {h[t2].text for h in store.histories().values() for t2 in range(1, len(h))
                if context_text(h[:t2], k) == context_text(hist[:t], k)}
        assert agent.respond(hist[:t], n=1, seed=t)[0] in same
    openings = {h[0].text for h in store.histories().values()}
    drawn = {agent.respond([], n=1, seed=s)[0] for s in range(20)}
    assert drawn <= openings and len(drawn) > 1  # the agent's own openings, drawn by seed
    assert agent.respond(hist[:3], n=2, seed=1) == agent.respond(hist[:3], n=2, seed=1)
    assert "approximation" in repr(agent)


def test_unseen_state_gets_one_of_the_agents_replies(see_stores, settings):
    selfplay, _ = see_stores
    agent = load_agent(f"transcripts:{selfplay}?agent={AGENT}", settings)
    reply = agent.respond([Turn("user", "do you like to cook pasta on weekends?")], n=1, seed=0)[0]
    assert reply in set(agent.replies)


def test_on_support_answers_with_logged_replies(see_stores, settings):
    selfplay, human = see_stores
    agent = load_agent(f"transcripts-onsupport:{selfplay}?agent={AGENT}&store={human}", settings)
    logged = {r["text"] for r in ExperienceStore.open(human).turns.to_pylist() if r["role"] == "agent"}
    history = [Turn("user", "hi! how are you today?")]
    replies = agent.respond(history, n=3, seed=4)
    assert set(replies) <= logged
    direct = agent.direct.respond(history, n=3, seed=4)
    v = agent.embedder.embed(direct)
    nearest = [agent.logged[int((agent.logged_vectors @ x).argmax())] for x in v]
    assert replies == nearest


@pytest.fixture(scope="module")
def own_chats(raw_data, tmp_path_factory):
    """Two bots' rated chats with people, as one store (the See 2019 logs)."""
    from enigma.params import Params

    cfg = Params.load(Path(__file__).resolve().parents[2] / "params.yaml").ingest
    logs = tmp_path_factory.mktemp("logs")
    for name in ("baseline_model", AGENT):
        (logs / f"{name}.jsonl").write_bytes((raw_data / "see2019_convai2_humaneval" / "evallog" / f"{name}.jsonl").read_bytes())
    return _first(read("see2019", logs, cfg), 12).write(tmp_path_factory.mktemp("own") / "store")


def test_own_chats_stand_in_answers_with_the_bots_turns_only(own_chats, settings):
    """A rated store is conversations with people: the stand-in retrieves the bot's own turns,
    never the person's, even though both_sides is on (it is, for self-play)."""
    assert settings.transcripts.both_sides
    agent = load_agent(f"transcripts:{own_chats}?agent={AGENT}", settings)
    store = ExperienceStore.open(own_chats).filter_agents(keep={AGENT})
    histories = store.histories().values()
    bot = {t.text for h in histories for t in h if t.role == "agent"}
    person = {t.text for h in histories for t in h if t.role != "agent"} - bot
    assert not agent.both_sides and person
    assert set(agent.replies) | set(agent.openings) <= bot
    assert set(agent.replies) >= {t.text for h in histories for t in h[1:] if t.role == "agent"}
    assert "its own turns" in repr(agent)
    # the bot's replies to its own chats' contexts are what it said there
    for h in histories:
        t = next(i for i, turn in enumerate(h) if i > 0 and turn.role == "agent")
        assert agent.respond(h[:t], n=1, seed=0)[0] in bot


def test_own_chats_stand_in_reads_no_rating(own_chats, settings, tmp_path):
    """Regime (c): ratings changed (reversed, or all missing) give the same stand-in, reply for
    reply; only dialogue ids, agent ids and turns are loaded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from enigma.store import schema as S

    def with_ratings(fill, name):
        d = pq.read_table(own_chats / S.DIALOGUES_FILE)
        for i, col in enumerate(d.schema.names):
            if col.startswith(S.RATING_PREFIX):
                d = d.set_column(i, col, fill(d.column(col)))
        out = tmp_path / name
        out.mkdir()
        pq.write_table(d, out / S.DIALOGUES_FILE)
        (out / S.TURNS_FILE).write_bytes((own_chats / S.TURNS_FILE).read_bytes())
        return out

    reversed_ = with_ratings(lambda c: pa.array([1.0 - v if v is not None else None for v in c.to_pylist()]), "reversed")
    missing = with_ratings(lambda c: pa.nulls(len(c), pa.float64()), "missing")
    agents = [load_agent(f"transcripts:{d}?agent={AGENT}", settings) for d in (own_chats, reversed_, missing)]
    assert agents[0].replies == agents[1].replies == agents[2].replies
    states = [h[:t] for h in ExperienceStore.open(own_chats).without_agent(AGENT).histories().values() for t in (0, 1, 3)]
    answers = [[a.respond(s, n=2, seed=i)[0] for i, s in enumerate(states)] for a in agents]
    assert answers[0] == answers[1] == answers[2]


def test_own_chats_stand_in_through_the_sampler_as_the_benchmark_runs_it(own_chats, settings, tmp_path):
    """The user's path of see2019-ownchats: the benchmark's agent_spec with {store} filled in, and
    the sampler at every logged agent turn of the other bots' dialogues: every reply is one the
    held-out bot said to people, and none of its own states is asked about."""
    from enigma.params import Params

    entry = {"source": {"ingest": "see2019", "path": "raw"}, "rollouts": None,
             "agent_spec": "transcripts:{store}?agent={agent}", "estimators": ["experience-mean"],
             "knowledge": None, "full_estimators": [], "note": None}
    b = Params.from_dict({"pipeline": {"data_dir": str(tmp_path)}, "report": {"out_dir": "r"},
                          "benchmarks": {"own": entry}}).benchmark("own")
    import shutil

    shutil.copytree(own_chats, b.store)
    table = sample_targets(str(b.store), b.agent_spec(AGENT), exclude_agents=(AGENT,), cache_dir=tmp_path / "cache",
                           settings=settings, progress=False)
    store = ExperienceStore.open(b.store)
    said = {r["text"] for r in store.filter_agents(keep={AGENT}).turns.to_pylist() if r["role"] == "agent"}
    others = set(store.without_agent(AGENT).dialogues.column("dialog_id").to_pylist())
    assert table.num_rows > 0 and table.column("error").null_count == table.num_rows
    assert set(table.column("text").to_pylist()) <= said
    assert set(table.column("dialog_id").to_pylist()) <= others
    assert "approximation" in table.schema.metadata[b"enigma.sampling.approximation"].decode()


def test_on_support_never_snaps_to_the_stand_ins_own_logged_replies(own_chats, settings):
    """Held out, the agent's own logged dialogues are not in the logs the estimate uses, so
    the on-support stand-in snaps only to the other agents' replies (with its own chats as the
    transcripts, snapping to them would give the direct stand-in back)."""
    agent = load_agent(f"transcripts-onsupport:{own_chats}?agent={AGENT}&store={own_chats}", settings)
    store = ExperienceStore.open(own_chats)
    others = {r["text"] for r in store.without_agent(AGENT).turns.to_pylist() if r["role"] == "agent"}
    own_only = set(agent.direct.replies) - others
    assert own_only and set(agent.logged) == others
    replies = [agent.respond([Turn("user", q)], n=2, seed=s) for s, q in enumerate(["hi how are you?", "what do you do for fun?"])]
    assert {r for pair in replies for r in pair} <= others


def test_sampling_with_transcripts_is_labelled(see_stores, settings, tmp_path):
    selfplay, human = see_stores
    spec = f"transcripts:{selfplay}?agent={AGENT}"
    table = sample_targets(ExperienceStore.open(human), spec, cache_dir=tmp_path, settings=settings, progress=False)
    assert table.column("error").null_count == table.num_rows > 0
    assert table.schema.metadata[b"enigma.sampling.approximation"].decode() == approximation_label(spec)
    assert "approximation" in approximation_label(spec)


def test_every_bot_opened_chat_gets_its_own_opening(raw_data, see_stores, settings, tmp_path):
    """Half the See 2019 chats are opened by the bot from the same empty history: each of them
    is a visit of that state, so the stand-in draws an opening for each (it used to give one
    opening to all of them)."""
    selfplay, _ = see_stores
    from enigma.params import Params

    cfg = Params.load(Path(__file__).resolve().parents[2] / "params.yaml").ingest
    logs = read("see2019", raw_data / "see2019_convai2_humaneval" / "evallog" / "baseline_model.jsonl", cfg)
    store = ExperienceStore(logs.dialogues, logs.turns)
    spec = f"transcripts:{selfplay}?agent={AGENT}"
    table = sample_targets(store, spec, cache_dir=tmp_path, settings=settings, progress=False)
    agent = load_agent(spec, settings)
    opened = [r for r in table.to_pylist() if r["turn_index"] == 0]
    assert len(opened) >= 20 and len(set(agent.openings)) > 1
    assert len({r["text"] for r in opened}) > 1 and {r["text"] for r in opened} <= set(agent.openings)


def test_bad_transcript_specs(see_stores, settings, tmp_path):
    selfplay, _ = see_stores
    with pytest.raises(AgentSpecError, match="holds 2 agents; choose one"):
        load_agent(f"transcripts:{selfplay}", settings)
    with pytest.raises(AgentSpecError, match="agent 'nobody' not in the store"):
        load_agent(f"transcripts:{selfplay}?agent=nobody", settings)
    with pytest.raises(AgentSpecError, match="not a directory"):
        load_agent(f"transcripts:{tmp_path / 'missing'}", settings)
    with pytest.raises(AgentSpecError, match="needs the experience store"):
        load_agent(f"transcripts-onsupport:{selfplay}?agent={AGENT}", settings)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "turns.parquet").write_bytes((selfplay / "turns.parquet").read_bytes())
    with pytest.raises(AgentSpecError, match=r"broken/dialogues.parquet: missing"):
        load_agent(f"transcripts:{broken}?agent={AGENT}", settings)
    (broken / "dialogues.parquet").write_text("not parquet")
    with pytest.raises(AgentSpecError, match=r"broken/dialogues.parquet: not a readable Parquet file"):
        load_agent(f"transcripts:{broken}?agent={AGENT}", settings)


def test_sources_are_the_conversations_the_replies_were_said_in_and_change_no_reply(see_stores, settings, tmp_path):
    """``transcripts.sources``: through the sampler, the same replies as without it (same seed,
    same draws), each with the turns of its own self-play chat before it; off, the table and the
    agent's fingerprint are what they were (no column, no settings key)."""
    from enigma.agents import fingerprint

    selfplay, human = see_stores
    spec = f"transcripts:{selfplay}?agent={AGENT}"
    sourced = AgentSettings(transcripts=settings.transcripts.model_copy(update={"sources": True}))
    settings = AgentSettings(transcripts=settings.transcripts.model_copy(update={"sources": False}))
    plain = sample_targets(ExperienceStore.open(human), spec, cache_dir=tmp_path / "a", settings=settings, progress=False)
    table = sample_targets(ExperienceStore.open(human), spec, cache_dir=tmp_path / "b", settings=sourced, progress=False)
    assert "source_context" not in plain.column_names
    assert table.column("text").to_pylist() == plain.column("text").to_pylist()
    said_after = {}
    for h in ExperienceStore.open(selfplay).filter_agents(keep={AGENT}).histories().values():
        for t in range(len(h)):
            said_after.setdefault(h[t].text, set()).add(json.dumps([[x.role, x.text] for x in h[:t]]))
    pairs = list(zip(table.column("text").to_pylist(), table.column("source_context").to_pylist()))
    assert pairs and all(source in said_after[text] for text, source in pairs)
    assert any(source != "[]" for _, source in pairs) and "[]" in {s for _, s in pairs}  # openings have no context
    agent, agent_sourced = load_agent(spec, settings), load_agent(spec, sourced)
    assert "sources" not in agent.fingerprint_parts()["settings"]
    assert fingerprint(spec, agent) != fingerprint(spec, agent_sourced)
    # on-support: a snapped reply's source is the stand-in's own chat where it said the reply it
    # snapped from (the direct stand-in's draw at the same call), not the logged chat of the words
    on_support = f"transcripts-onsupport:{selfplay}?agent={AGENT}&store={human}"
    snapped = sample_targets(ExperienceStore.open(human), on_support, cache_dir=tmp_path / "c", settings=sourced, progress=False)
    assert snapped.column("source_context").to_pylist() == table.column("source_context").to_pylist()
    own_chats = set().union(*said_after.values())
    assert all(source in own_chats for source in snapped.column("source_context").to_pylist())
    assert snapped.column("text").to_pylist() != table.column("text").to_pylist()  # the words are the logs'
    plain_snapped = sample_targets(ExperienceStore.open(human), on_support, cache_dir=tmp_path / "d", settings=settings, progress=False)
    assert snapped.column("text").to_pylist() == plain_snapped.column("text").to_pylist()
    assert "source_context" not in plain_snapped.column_names
    snapped_agent = load_agent(on_support, sourced)
    assert snapped_agent.fingerprint_parts()["snapped_source"] == "the stand-in's own chat"
    assert "snapped_source" not in load_agent(on_support, settings).fingerprint_parts()


def _booking_store(path: Path) -> Path:
    """Two agents' rated chats that name people, cities and dates: 'polite' books Paris and Oslo
    for its customers, 'blunt' Rome and Lima for its own."""
    from tests.stores import chat_store

    chats = []
    for i, (agent, who, city, day) in enumerate([("polite", "Ann Lee", "Paris", "9th"), ("polite", "Tom Hart", "Oslo", "12th"),
                                                ("polite", "Eve Moss", "Paris", "3rd"), ("blunt", "Sam Ray", "Rome", "5th"),
                                                ("blunt", "Joe Kim", "Lima", "20th"), ("blunt", "Liz Ng", "Rome", "7th"),
                                                ("blunt", "Max Orr", "Lima", "1st"), ("blunt", "Amy Fox", "Rome", "14th")]):
        chats.append((f"{agent}-{i}", agent, [
            ("user", f"hi, I am {who} and I need a flight"), ("agent", f"Sure {who.split()[0]}, where to?"),
            ("user", f"to {city} on the {day}"), ("agent", f"Booked {city} on the {day} for {who}, flight {1000 + i}.")],
            {"q": float(i % 3) / 2}))
    return chat_store(chats, ("q",)).write(path)


def _booking_params(settings) -> dict:
    """The repository's params.yaml for a store of 8 chats, with the tests' sentence-vector cache."""
    import yaml

    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    params["sample"]["agents"]["transcripts"]["embed_cache_dir"] = settings.transcripts.embed_cache_dir
    params["estimators"]["enigma"]["dice"].update(interval_resamples=0, project_dim=4)
    return params


def _estimate_polite(store: Path, params: dict, tmp_path: Path, name: str) -> dict:
    """``enigma estimate`` as a user runs it, ``params`` written as their params file: regime (c),
    'polite' stood in for by its own chats and estimated from 'blunt's. The estimates.json."""
    import yaml
    from typer.testing import CliRunner

    from enigma.cli import app

    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(params))
    r = CliRunner().invoke(app, ["estimate", "--experience", str(store), "--target", f"polite=transcripts:{store}?agent=polite",
                                 "--out", str(tmp_path / name), "--params", str(tmp_path / f"{name}.yaml"),
                                 "--cache-dir", str(tmp_path / "cache" / name), "-q"])
    assert r.exit_code in (0, 3), r.output  # 3: flagged (a handful of dialogues), still estimated
    return json.loads((tmp_path / name / "estimates.json").read_text())


def test_sources_set_in_the_params_file_reach_the_estimate_through_the_cli(settings, tmp_path):
    """The user's path: ``sample.agents.transcripts.sources`` in the params file, ``enigma estimate
    --target`` with a stand-in spec. The retrieved replies name the stand-in's own customers and
    cities; with their sources the grounding block reads them against those chats, so the estimate
    moves (with the block blind to the sources, the two estimates are the same). The previous turn
    and the reply measures read the logged chat here (``target_history: logged``), so that only the
    grounding block can tell the two runs apart."""
    store = _booking_store(tmp_path / "store")
    params = _booking_params(settings)
    params["estimators"]["enigma"]["dice"]["target_history"] = "logged"

    def estimate(name: str, sources: bool) -> dict:
        params["sample"]["agents"]["transcripts"]["sources"] = sources
        return _estimate_polite(store, params, tmp_path, name)

    on, off = estimate("on", True), estimate("off", False)
    assert on != off
    # a knowledge base is refused with a stand-in that does not record its sources, and read with one that does
    params["estimators"]["enigma"]["dice"]["knowledge"] = "python:enigma.sim.knowledge:airline_checked"
    with pytest.raises(AssertionError, match="sample.agents.transcripts.sources: true"):
        estimate("refused", False)
    assert estimate("knowledge", True) != on


def test_target_history_source_set_in_the_params_file_reads_the_stand_ins_own_chats_through_the_cli(settings, tmp_path):
    """``dice.target_history: source`` in the user's params file: a stand-in that records its
    sources has each reply read after the chat it was said in (its measures, its previous turn),
    so the estimate moves; without sources there is nothing else to read it after, and the
    estimate is the logged reading's. ``own`` reads it after the stand-in's earlier replies."""
    store = _booking_store(tmp_path / "store")
    params = _booking_params(settings)

    def estimate(name: str, sources: bool, history: str) -> dict:
        params["sample"]["agents"]["transcripts"]["sources"] = sources
        params["estimators"]["enigma"]["dice"]["target_history"] = history
        out = _estimate_polite(store, params, tmp_path, name)
        assert out["diagnostics"]["polite"]["config"]["target_history"] == history
        return out["targets"]

    assert estimate("source", True, "source") != estimate("logged", True, "logged")
    logged = estimate("unsourced-logged", False, "logged")
    assert estimate("unsourced", False, "source") == logged
    # own: each reply read after the stand-in's own replies at the chat's earlier turns
    assert estimate("own", False, "own") != logged


def test_the_stand_ins_fingerprint_names_the_vectors_recipe(see_stores, settings, monkeypatch):
    """Retrieval reads the embedding cache's vectors, and a near tie may fall the other way with
    another recipe's: replies sampled with old vectors are not reused from the sample cache (the
    on-support stand-in, which wraps the direct one, likewise)."""
    from enigma.agents import fingerprint
    from enigma.encoders import text_cache

    selfplay, human = see_stores
    specs = [f"transcripts:{selfplay}?agent={AGENT}", f"transcripts-onsupport:{selfplay}?agent={AGENT}&store={human}"]
    before = [fingerprint(s, load_agent(s, settings)) for s in specs]
    monkeypatch.setattr(text_cache, "VECTORS", text_cache.VECTORS + 1)
    after = [fingerprint(s, load_agent(s, settings)) for s in specs]
    assert before[0] != after[0] and before[1] != after[1]
