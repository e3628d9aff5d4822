"""DuckDB queries over a store's Parquet files, in place (no copy into a database)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from enigma.store import schema as S
from enigma.store.experience import ExperienceStore, StoreError


def connect():
    import duckdb

    # A remote or unknown path must fail at once, not try to download an extension.
    return duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})


def _quote_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def agent_summary(store_dir: str | Path) -> pa.Table:
    """Per agent: dialogue count, turn count and the mean of every normalised rating, with
    ``n_<rating>`` where a rating has nulls (the mean is over the non-null values)."""
    store_dir = Path(store_dir)
    # Opening validates that both files exist and are Parquet, with a clear error otherwise.
    store = ExperienceStore.open(store_dir)
    ratings = store.rating_names
    dialogues = _quote_path(store_dir / S.DIALOGUES_FILE)
    means = "".join(f', avg("{S.RATING_PREFIX}{r}") AS "mean_{r}"' for r in ratings)
    counts = "".join(f', count("{S.RATING_PREFIX}{r}") AS "n_{r}"' for r in ratings)
    sql = (
        f"SELECT agent_id, count(*) AS n_dialogues, CAST(sum(n_turns) AS BIGINT) AS n_turns{means}{counts} "
        f"FROM read_parquet({dialogues}) GROUP BY agent_id ORDER BY agent_id"
    )
    import duckdb

    con = connect()
    try:
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise StoreError(f"{store_dir}: summary query failed ({exc})") from exc
    finally:
        con.close()


def store_counts(store_dir: str | Path) -> dict[str, int]:
    store_dir = Path(store_dir)
    con = connect()
    try:
        out = {}
        for name, f in (("dialogues", S.DIALOGUES_FILE), ("turns", S.TURNS_FILE), ("rejects", S.REJECTS_FILE)):
            p = store_dir / f
            out[name] = con.execute(f"SELECT count(*) FROM read_parquet({_quote_path(p)})").fetchone()[0] if p.is_file() else 0
        out["agents"] = con.execute(
            f"SELECT count(DISTINCT agent_id) FROM read_parquet({_quote_path(store_dir / S.DIALOGUES_FILE)})"
        ).fetchone()[0]
        return out
    finally:
        con.close()


def rejects_by_reason(store_dir: str | Path, limit: int = 20) -> pa.Table:
    p = Path(store_dir) / S.REJECTS_FILE
    if not p.is_file():
        return pa.table({"field": pa.array([], pa.string()), "reason": pa.array([], pa.string()), "n": pa.array([], pa.int64())})
    con = connect()
    try:
        return con.sql(
            f"SELECT field, reason, count(*) AS n FROM read_parquet({_quote_path(p)}) "
            f"GROUP BY field, reason ORDER BY n DESC, field LIMIT {int(limit)}"
        ).to_arrow_table()
    finally:
        con.close()
