"""See 2019 self-play transcripts (``selfplay_hmjiang/<model_name>.jsonl``): unrated chats of
each bot with itself, one JSON array per file, each chat a list of ``[side_A, side_B]``
utterance pairs.

Both sides are the same bot. We store side A as ``user`` and side B as ``agent`` so that every
agent turn answers the history before it, as in the human logs; ``agent_id`` is the file stem
and ``source`` is ``see2019-selfplay``. These go to their own store directory: they carry no
ratings and must never be mixed with the rated human dialogues.

``interesting_nidf_model_ct_setting4.jsonl`` holds a single chat shaped as two lists of six
utterances rather than six pairs; it does not fit the format (and reads like a human-bot chat,
not self-play), so it becomes a reject with that reason rather than a guess.
"""

from __future__ import annotations

from pathlib import Path

from enigma.store.config import IngestConfig, SourceSpec
from enigma.store.readers.base import (
    ReadResult,
    RecordRejected,
    StoreBuilder,
    broken_links,
    check_json,
    existing_path,
    input_files,
    progress,
    read_json_document,
)

SOURCE = "see2019-selfplay"


def _selfplay_dir(path: Path) -> Path:
    return path / "selfplay_hmjiang" if (path / "selfplay_hmjiang").is_dir() else path


def _turns(chat) -> list[tuple[str, object]]:
    if not isinstance(chat, list) or not chat:
        raise RecordRejected(None, f"expected a non-empty list of [side_A, side_B] pairs, got {type(chat).__name__}")
    turns: list[tuple[str, object]] = []
    for i, pair in enumerate(chat):
        if not isinstance(pair, list) or len(pair) != 2:
            size = len(pair) if isinstance(pair, list) else type(pair).__name__
            raise RecordRejected(f"chat[{i}]", f"expected a [side_A, side_B] pair, got {size!r} items")
        turns += [("user", pair[0]), ("agent", pair[1])]
    return turns


def read(path: str | Path, config: IngestConfig, spec: SourceSpec | None = None, progress_bars: bool = False) -> ReadResult:
    root = _selfplay_dir(existing_path(path, "See 2019 self-play transcripts"))
    builder = StoreBuilder(SOURCE, spec or SourceSpec(), config)
    files = input_files(root, "*.jsonl", "See 2019 self-play transcripts")
    builder.inputs = files
    for link, reason in broken_links(root, "*.jsonl"):
        builder.reject(link, None, None, reason)
    for f in progress(files, desc="see2019-selfplay", enabled=progress_bars, unit="file"):
        agent = f.stem
        try:
            chats = read_json_document(f)
        except RecordRejected as exc:
            builder.reject(f, None, exc.field, exc.reason)
            continue
        if not isinstance(chats, list):
            builder.reject(f, None, None, f"expected a JSON array of chats, got {type(chats).__name__}")
            continue
        if not chats:
            builder.reject(f, None, None, "empty array (no chats)")
            continue
        for i, chat in enumerate(chats, start=1):
            dialog_id = f"selfplay:{agent}:{i:04d}"
            try:
                check_json(chat, config.max_json_depth, "chat")
                turns = _turns(chat)
            except RecordRejected as exc:
                builder.reject(f, i, exc.field, exc.reason, dialog_id)
                continue
            builder.add(f, i, dialog_id=dialog_id, agent_id=agent, turns=turns,
                        meta={"file": f.name, "chat_index": i, "speakers": "self-play: both sides are the agent"})
    return builder.build()
