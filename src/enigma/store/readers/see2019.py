"""See et al. 2019 ConvAI2 human evaluation logs (``evallog/<model_name>.jsonl``).

One JSON object per line: ``dialog`` (12 turns of ``{"speaker": "model"|"human_evaluator",
"text"}``), ``evaluation_results`` (9 ratings) and metadata. The bot is the agent; the human
evaluator is the user. About half the chats start with the bot: that order is kept, so turn 0
is then an agent turn. ``dialog_id`` is the (unique) ``assignment_id_hashed``. Ratings are
normalised per ``params.yaml`` (``ingest.sources.see2019``: divided by 4 as in the ENIGMA paper,
plus ``reward``, the mean of the 9); the raw values stay in ``raw_<name>``; personas, rater ids,
model type/bucket and timings go to ``meta``.
"""

from __future__ import annotations

from pathlib import Path

from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.readers.base import (
    ReadResult,
    add_json_lines,
    broken_links,
    RecordRejected,
    StoreBuilder,
    existing_path,
    require_scales,
    input_files,
    iter_lines,
    progress,
)

SOURCE = "see2019"
SPEAKER_ROLES = {"model": "agent", "human_evaluator": "user"}
META_FIELDS = (
    "model_type", "model_bucket", "model_persona", "human_persona", "evaluator_id_hashed",
    "oz_id_hashed", "start_time", "total_time",
)


def _evallog_dir(path: Path) -> Path:
    # Accept the data set folder as published (it holds evallog/), the folder itself or a file.
    return path / "evallog" if (path / "evallog").is_dir() else path


def _parse(obj, spec: SourceSpec) -> dict:
    if not isinstance(obj, dict):
        raise RecordRejected(None, f"expected a JSON object, got {type(obj).__name__}")
    dialog_id = obj.get("assignment_id_hashed")
    for name in ("assignment_id_hashed", "model_name", "dialog", "evaluation_results"):
        if obj.get(name) is None:
            raise RecordRejected(name, f"missing field {name!r}", dialog_id if isinstance(dialog_id, str) else None)
    dialog, ratings = obj["dialog"], obj["evaluation_results"]
    if not isinstance(dialog, list):
        raise RecordRejected("dialog", f"dialog must be a list, got {type(dialog).__name__}")
    if not isinstance(ratings, dict):
        raise RecordRejected("evaluation_results", f"must be an object, got {type(ratings).__name__}")
    missing = [n for n in spec.ratings if n not in ratings]
    if missing:
        raise RecordRejected(f"evaluation_results.{missing[0]}", f"missing rating(s) {missing}")
    turns = []
    for i, t in enumerate(dialog):
        if not isinstance(t, dict):
            raise RecordRejected(f"dialog[{i}]", f"expected an object with speaker and text, got {type(t).__name__}")
        speaker = t.get("speaker")
        if speaker not in SPEAKER_ROLES:
            raise RecordRejected(f"dialog[{i}].speaker", f"unknown speaker {speaker!r}; expected one of {list(SPEAKER_ROLES)}")
        if "text" not in t:
            raise RecordRejected(f"dialog[{i}].text", "missing field 'text'")
        turns.append((SPEAKER_ROLES[speaker], t["text"]))
    meta = {k: obj.get(k) for k in META_FIELDS if k in obj}
    meta["first_speaker"] = turns[0][0] if turns else None
    return {"dialog_id": dialog_id, "agent_id": obj["model_name"], "turns": turns, "ratings": ratings, "meta": meta}


def read(path: str | Path, config: IngestConfig, spec: SourceSpec | None = None, progress_bars: bool = False) -> ReadResult:
    spec = spec or config.source(SOURCE)
    root = _evallog_dir(existing_path(path, "See 2019 evaluation logs"))
    require_scales(spec, SOURCE)
    builder = StoreBuilder(SOURCE, spec, config)
    files = input_files(root, "*.jsonl", "See 2019 evaluation logs")
    builder.inputs = files
    for link, reason in broken_links(root, "*.jsonl"):
        builder.reject(link, None, None, reason)
    for f in progress(files, desc="see2019", enabled=progress_bars, unit="file"):
        add_json_lines(builder, f, iter_lines(f), lambda obj: _parse(obj, spec), "assignment_id_hashed")
    return builder.build()
