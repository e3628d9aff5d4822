"""Issue 59, item 3: a saved result's estimator fingerprint became a digest of the estimator's
FULL resolved settings and its numerics version (enigma.evaluation.fingerprints). Before, the
DICE fingerprint left out settings at the values they had before the settings existed (the
"history tables" of enigma/ope/config.py), so that results saved before them kept their keys.
Dropping the tables changes every estimator's fingerprint once, but no number: this script
carries the saved results over, so the train stage reuses them instead of rerunning hours.

A result file ``data/<b>/<results folder>/<estimator>/<agent>.json`` is keyed by
``"<store fp>-<estimator fp>-<target fp>"`` (result_fingerprint); only the middle part changed.

    # 1. on the code BEFORE the change: every (benchmark, estimator)'s old estimator fingerprint,
    #    and every ENIGMA row's resolved configuration (the reference the change must not move)
    .venv/bin/python studies/refingerprint.py dump
    .venv/bin/python studies/refingerprint.py configs
    # 2. on the code after: the resolved configurations against the committed reference
    .venv/bin/python studies/refingerprint.py configs --check
    # 3. rewrite the middle part of each result whose estimator fp is the old one (atomically,
    #    nothing else in the file changes); anything else is left alone and counted stale
    .venv/bin/python studies/refingerprint.py migrate data [--dry-run]
    # 4. the train stage's own resume path (enigma.evaluation.loao.evaluate_one, as
    #    enigma.pipeline.train calls it) reuses the migrated results: the first agents of each
    #    estimator, with its estimate() replaced by an error, so nothing is recomputed or written
    .venv/bin/python studies/refingerprint.py verify data [--results DIR] [--agents 2]
    # 5. one migrated result against a fresh run of the new code, byte for byte
    .venv/bin/python studies/refingerprint.py fresh <benchmark> <estimator> <agent> [--main]

A later change that adds a setting (a new field at a default that moves no number, e.g. issue 71's
``fqe.history_extremes``) migrates the same way, with its own reference: ``dump --out F`` on the
code before, ``migrate --before F`` on the code after. A part recorded without the added field
(``fqe``'s dict) is carried over only where the new code reads it to the same settings.

The estimators are built as the benchmarks build them (enigma.estimators.benchmark_estimator),
from params.yaml and studies/params.yaml (which extends it: the lab's rows, results_studies).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "results"
BEFORE = RESULTS / "fingerprints_before_refingerprint.json"
CONFIGS_BEFORE = RESULTS / "refingerprint_configs_before.json"
PARAMS_FILES = ("params.yaml", "studies/params.yaml")
RESULT_FOLDERS = ("results", "results_full", "results_studies")  # main, the product's full run, the lab's


def benchmark_estimators(params_file: str) -> Iterator[tuple[str, str, object, object]]:
    """``(benchmark, registry name, estimator, params)`` for every estimator of every benchmark
    of ``params_file`` (its ``estimators`` and ``full_estimators``), built as the train stage
    builds it."""
    from enigma.estimators import benchmark_estimator
    from enigma.params import Params

    params = Params.load(REPO / params_file)
    for bench, entry in params.benchmarks.items():
        b = params.benchmark(bench)
        for name in dict.fromkeys(entry.estimators + entry.full_estimators):
            yield bench, name, benchmark_estimator(b, name, params), params


def fingerprints() -> dict[str, dict[str, str]]:
    """{benchmark: {estimator name (its result folder, unquoted): estimator fingerprint}} with
    the code as it is. An estimator named alike in both files must be keyed alike: the lab's
    file extends the product's, so it resolves the product's rows as the product does."""
    from enigma.evaluation.fingerprints import estimator_fingerprint

    out: dict[str, dict[str, str]] = {}
    for params_file in PARAMS_FILES:
        for bench, name, est, _ in benchmark_estimators(params_file):
            fp = estimator_fingerprint(est)
            seen = out.setdefault(bench, {}).setdefault(est.name, fp)
            if seen != fp:
                raise SystemExit(f"{params_file}: benchmarks.{bench}: {name} ({est.name}) keys {fp}, another file's {seen}")
    return {b: dict(sorted(m.items())) for b, m in sorted(out.items())}


def resolved_configs() -> dict[str, dict[str, dict]]:
    """{params file: {benchmark: {ENIGMA entry: its estimator's resolved DiceConfig, as JSON}}}: a
    flat section (``DiceConfig.flat()``) where the code has one, so that a reference written before
    the config was split into parts (issue 59, item 3) compares key by key with one written after."""
    from enigma.ope.estimator import EnigmaEstimator

    out: dict[str, dict[str, dict]] = {}
    for params_file in PARAMS_FILES:
        for bench, name, est, _ in benchmark_estimators(params_file):
            if isinstance(est, EnigmaEstimator):
                cfg = est.config
                flat = cfg.flat() if hasattr(cfg, "flat") else cfg.model_dump(mode="json")
                out.setdefault(params_file, {}).setdefault(bench, {})[name] = flat
    return out


def rewrite_fingerprint(path: Path, old: str, new: str) -> None:
    """Put ``new`` in place of fingerprint ``old`` in result file ``path``, every other byte as
    it was, atomically (a temporary file beside it, then a rename: a reader sees the old file or
    the new one). The file is as enigma.evaluation.results.write_result writes it,
    ``json.dumps({"fingerprint": ..., "rows": ...}, indent=1)``, so the fingerprint is its first
    field; a file that is not raises ValueError and is left as it was."""
    text = path.read_text()
    head = '{\n "fingerprint": ' + json.dumps(old) + ",\n"
    if not text.startswith(head):
        raise ValueError(f"{path}: does not start with fingerprint {old!r} as write_result writes it")
    updated = '{\n "fingerprint": ' + json.dumps(new) + ",\n" + text[len(head):]
    before, after = json.loads(text), json.loads(updated)
    if after.pop("fingerprint") != new or before.pop("fingerprint") != old or json.dumps(after) != json.dumps(before):
        raise ValueError(f"{path}: the rewrite would change more than the fingerprint")
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(updated)
    os.replace(tmp, path)


def _resolves_alike(new: dict, key: str, old_value) -> bool:
    """Whether a recorded part (``fqe``'s dict, say) written before a setting was added to it
    resolves to the same settings as the new one: the new code reads the old value, the added
    field takes its default, and the flat config comes back equal to ``new``."""
    from enigma.ope.config import DiceConfig

    if not isinstance(old_value, dict) or not isinstance(new.get(key), dict) or not set(old_value) < set(new[key]):
        return False
    try:
        return DiceConfig.from_flat({**new, key: old_value}).flat() == new
    except ValueError:
        return False


def recorded_config(old: dict, est) -> dict:
    """What a run of ``est`` (the new code's estimator) records as ``diagnostics.config`` where a
    run of the old code recorded ``old``: the estimator's resolved settings as a flat section
    (``DiceConfig.flat()``) with the run's own tmax (derived from its logs when unset). Every key
    the two share must hold the same value (else ValueError: the settings differ, not their
    form); a key only the old one has is one the split config no longer carries (the other
    solver's, or one exact_nu fixes) and must be at the value the new config implies."""
    new = est.config.flat()
    if new.get("tmax") is None:
        new["tmax"] = old.get("tmax")
    differ = sorted(k for k in set(old) & set(new) if old[k] != new[k] and not _resolves_alike(new, k, old[k]))
    if differ:
        raise ValueError(f"the recorded settings differ from {est.name}'s: " + ", ".join(f"{k} {old[k]!r} -> {new[k]!r}" for k in differ))
    from enigma.ope.config import EXACT_NU_FIXED, DiceConfig

    try:  # the old keys the new config dropped, at their old values, must resolve to the same config
        DiceConfig.from_flat({**new, **{k: old[k] for k in set(old) - set(new) if k in EXACT_NU_FIXED}})
    except ValueError as exc:
        raise ValueError(f"a setting the new config dropped was not at its fixed value: {exc}") from None
    return new


def _settings_alike(path: Path, est) -> bool:
    """Whether every row of result file ``path`` recorded settings that resolve to ``est``'s."""
    for row in json.loads(path.read_text())["rows"]:
        diagnostics = json.loads(row["diagnostics"]) if row.get("diagnostics") else None
        if isinstance(diagnostics, dict) and isinstance(diagnostics.get("config"), dict):
            try:
                recorded_config(diagnostics["config"], est)
            except ValueError:
                return False
    return True


def rewrite_config(path: Path, est) -> None:
    """Result file ``path`` with each row's recorded ``diagnostics.config`` in the new code's form
    (``recorded_config``), written as the runner writes it (its JSON form, the diagnostics
    serialised with sorted keys), so the file is byte for byte what a fresh run writes."""
    saved = json.loads(path.read_text())
    rows = []
    for row in saved["rows"]:
        diagnostics = json.loads(row["diagnostics"]) if row.get("diagnostics") else None
        if isinstance(diagnostics, dict) and isinstance(diagnostics.get("config"), dict):
            diagnostics["config"] = recorded_config(diagnostics["config"], est)
            row = {**row, "diagnostics": json.dumps(diagnostics, sort_keys=True, default=str)}
        rows.append(row)
    text = json.dumps({"fingerprint": saved["fingerprint"], "rows": rows}, indent=1)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def migrate_folder(folder: Path, old_fps: dict[str, str], new_fps: dict[str, str], dry_run: bool = False,
                   estimators: dict[str, object] | None = None) -> dict[str, int]:
    """Every result file of ``folder`` (``<estimator>/<agent>.json``) whose estimator fingerprint
    is the old one gets the new one. Counts: migrated, already (the new one: a rerun changes
    nothing), changed (the old key, but a DICE result whose recorded settings the new code does
    not resolve alike: a setting of this estimator changed, so it is left for the train stage to
    recompute), stale (neither: an edited setting or a failure record; the train stage recomputes
    it), unknown (an estimator no benchmark runs). ``estimators`` (name: the new code's estimator):
    a DICE estimator's migrated files get their recorded settings in the new form too
    (``rewrite_config``)."""
    counts = {"migrated": 0, "already": 0, "changed": 0, "stale": 0, "unknown": 0}
    for path in sorted(folder.glob("*/*.json")):
        name = urllib.parse.unquote(path.parent.name)
        if name not in new_fps:
            counts["unknown"] += 1
            continue
        full = json.loads(path.read_text()).get("fingerprint")
        parts = full.split("-") if isinstance(full, str) else []
        if len(parts) != 3:  # "failed": a failure record, never reused
            counts["stale"] += 1
        elif parts[1] == new_fps[name]:
            counts["already"] += 1
        elif parts[1] == old_fps.get(name):
            est = (estimators or {}).get(name)
            dice = est is not None and hasattr(est.config, "flat")
            if dice and not _settings_alike(path, est):  # its settings changed, not their form: recomputed
                counts["changed"] += 1
                continue
            if not dry_run:
                rewrite_fingerprint(path, full, "-".join([parts[0], new_fps[name], parts[2]]))
                if dice:
                    rewrite_config(path, est)
            counts["migrated"] += 1
        else:
            counts["stale"] += 1
    return counts


def migrate(data_dirs: list[Path], dry_run: bool, before: Path = BEFORE) -> dict[str, dict[str, int]]:
    old = json.loads(before.read_text())["fingerprints"]
    new = fingerprints()
    if all(old.get(b, {}).get(n) == new[b][n] for b in new for n in new[b]):
        raise SystemExit("the code's fingerprints are all the old ones: run dump on the old code, migrate on the new")
    estimators: dict[str, dict[str, object]] = {}
    for params_file in PARAMS_FILES:
        for bench, _, est, _ in benchmark_estimators(params_file):
            estimators.setdefault(bench, {}).setdefault(est.name, est)
    report: dict[str, dict[str, int]] = {}
    for data in data_dirs:
        for bench in new:
            for sub in RESULT_FOLDERS:
                folder = data / bench / sub
                if folder.is_dir():
                    report[str(folder)] = counts = migrate_folder(folder, old.get(bench, {}), new[bench], dry_run, estimators.get(bench))
                    print(f"{folder}: " + ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
    return report


def experience(b) -> tuple[object, object | None]:
    """Benchmark ``b``'s store and its rollouts (None without), as the train stage opens them."""
    from enigma.store.experience import ExperienceStore

    return ExperienceStore.open(b.store), (ExperienceStore.open(b.rollouts) if b.rollouts is not None else None)


def agent_sources(b, est, agent: str, rollouts):
    """What the train stage gives ``est`` about held-out ``agent`` (enigma.pipeline.train.sources)."""
    from enigma.contracts import Regime
    from enigma.pipeline.sample import read_targets
    from enigma.pipeline.train import sources

    targets = read_targets(b, agent) if Regime.REPLIES_AT_LOGGED_STATES in est.regimes else None
    return sources(b, targets, rollouts)


def fresh(bench: str, name: str, agent: str, full: bool) -> int:
    """One carried-over result against a fresh run of today's code: recomputed as the train stage
    computes it (``evaluate_one``, not resumed) into a temporary folder and compared with the
    saved file: the json rows (their ``seconds`` aside), the fingerprint, and the heads and
    curve, byte for byte. 0 when all are the same."""
    import filecmp
    import tempfile

    from enigma.estimators import benchmark_estimator
    from enigma.evaluation.loao import evaluate_one
    from enigma.evaluation.results import result_path
    from enigma.params import Params

    params = Params.load(REPO / "params.yaml")
    b = params.benchmark(bench)
    store, rollouts = experience(b)
    est = benchmark_estimator(b, name, params)
    saved = result_path(b.results_dir(full), est.name, agent)
    if not saved.is_file():
        raise SystemExit(f"{saved}: no saved result to compare with")

    def rows(p: Path) -> dict:
        d = json.loads(p.read_text())
        for r in d["rows"]:
            r.pop("seconds", None)
        return d

    with tempfile.TemporaryDirectory() as tmp:
        evaluate_one(store, est, agent, agent_sources(b, est, agent, rollouts), tmp, resume=False)
        made = result_path(tmp, est.name, agent)
        checks = {"json rows (seconds aside)": rows(made) == rows(saved),
                  "fingerprint": json.loads(made.read_text())["fingerprint"] == json.loads(saved.read_text())["fingerprint"]}
        for f in sorted(made.parent.glob(agent + ".*")):
            if f.suffix not in (".json", ".seconds"):
                checks[f.name + " byte-identical"] = filecmp.cmp(f, saved.parent / f.name, shallow=False)
    for what, ok in checks.items():
        print(f"{what}: {'yes' if ok else 'NO'}")
    return 0 if all(checks.values()) else 1


def verify(data: Path, results_root: Path, n_agents: int, benchmarks: list[str] | None = None) -> dict[str, dict[str, int]]:
    """For each results folder under ``results_root`` and each estimator with result files there,
    its first ``n_agents`` held-out agents through ``evaluate_one`` (the train stage's call, its
    sources built by enigma.pipeline.train.sources from ``data``'s store, targets and rollouts):
    counts of results reused and of results it would have recomputed (an error: it never does)."""
    from enigma.evaluation.loao import evaluate_one
    from enigma.evaluation.results import result_path
    from enigma.pipeline.store import heldout_agents

    def refuse(experience, target):
        raise RuntimeError("the saved result was not reused: the train stage would recompute it")

    report: dict[str, dict[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    for params_file in PARAMS_FILES:
        from enigma.params import Params

        params = Params.load(REPO / params_file)
        for bench, entry in params.benchmarks.items():
            if benchmarks and bench not in benchmarks:
                continue
            b = params.benchmark(bench)
            b = dataclasses.replace(b, data_dir=data / bench)
            if not b.store.is_dir():
                continue
            store, rollouts = experience(b)
            agents, _ = heldout_agents(b)
            for full, names in ((False, entry.estimators), (True, entry.full_estimators)):
                folder = results_root / bench / b.results_dir(full).name
                for name in names:
                    from enigma.estimators import benchmark_estimator

                    est = benchmark_estimator(b, name, params)
                    if (str(folder), est.name) in seen:  # a row of both files (the main run's): checked once
                        continue
                    seen.add((str(folder), est.name))
                    saved = [a for a in agents if result_path(folder, est.name, a).is_file()][:n_agents]
                    if not saved:
                        continue
                    est.estimate = refuse  # this instance only: a result not reused raises, nothing is written
                    counts = report.setdefault(str(folder), {"reused": 0, "not reused": 0})
                    for a in saved:
                        try:
                            _, reused = evaluate_one(store, est, a, agent_sources(b, est, a, rollouts), folder)
                        except RuntimeError:
                            reused = False
                        counts["reused" if reused else "not reused"] += 1
                        print(f"{folder}/{est.name}/{a}: {'reused' if reused else 'NOT REUSED'}", flush=True)
    for folder, counts in report.items():
        print(f"{folder}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return report


def compare_config(before: dict | None, now: dict | None) -> tuple[bool, str]:
    """Whether a row resolves as before: every key it has now at the value it had; a key it no
    longer has only where the split config says it has no effect (the other solver's setting, or
    one exact_nu fixes, at its fixed value). Returns (same, what was set aside)."""
    if before is None or now is None:
        return False, "missing"
    from enigma.ope.config import _OWNERS, _SOLVERS, EXACT_NU_FIXED

    changed = [k for k in now if before.get(k, object()) != now[k]]
    other, fixed, unknown = [], [], []
    for key in sorted(set(before) - set(now)):
        part, field = _OWNERS.get(key, ("?", key))
        if now.get("solver") == "exact_nu" and key in EXACT_NU_FIXED:
            (fixed if before[key] == EXACT_NU_FIXED[key][0] else unknown).append(key)
        elif part == "solver" and field not in _SOLVERS[now["solver"]].model_fields:
            other.append(key)
        else:
            unknown.append(key)
    same = not changed and not unknown
    aside = f"{len(other)} of the other solver's, {len(fixed)} fixed by exact_nu at their values" if other or fixed else ""
    return same, aside if same else f"changed {changed}, lost {unknown}"


def check_configs(reference: Path = CONFIGS_BEFORE, report: Path = RESULTS / "refingerprint_configs_check.md") -> int:
    before = json.loads(reference.read_text())["configs"]
    now = resolved_configs()
    rows, differ = [], []
    for params_file in sorted(set(before) | set(now)):
        for bench in sorted(set(before.get(params_file, {})) | set(now.get(params_file, {}))):
            b, n = before.get(params_file, {}).get(bench, {}), now.get(params_file, {}).get(bench, {})
            for name in sorted(set(b) | set(n)):
                same, note = compare_config(b.get(name), n.get(name))
                rows.append((params_file, bench, name, ("same" if same else "DIFFERENT") + (f" ({note})" if note else "")))
                if not same:
                    differ.append(f"{params_file}:{bench}/{name}")
    from provenance import code_version

    lines = [
        "# Issue 59: every ENIGMA row resolves as before",
        "",
        f"Reproduce: `.venv/bin/python studies/refingerprint.py configs --check{'' if reference == CONFIGS_BEFORE else f' --reference {reference}'}` (the reference,",
        f"`{reference.resolve().relative_to(REPO) if reference.resolve().is_relative_to(REPO) else reference}`, was written by `configs` on the code before the change,",
        f"{json.loads(reference.read_text())['code']}). Each (params file, benchmark, ENIGMA entry): the estimator's whole",
        "resolved DiceConfig as a flat section (`DiceConfig.flat()`; before the split, `model_dump(mode=\"json\")`), built as",
        "the benchmark builds it, compared key by key: every key it has now at its old value; a key it no longer has only where",
        "it has no effect (the other solver's, or one exact_nu fixes, at its fixed value).",
        f"Code: {code_version()}.",
        "",
        f"- rows checked: {len(rows)}; the same: {len(rows) - len(differ)}",
        "",
        "**" + ("All the same." if not differ else "DIFFERENT: " + "; ".join(differ)) + "**",
        "",
        "| params file | benchmark | entry | resolved config |",
        "|---|---|---|---|",
        *[f"| {p} | {b} | {n} | {s} |" for p, b, n, s in rows],
    ]
    report.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:11]))
    return 1 if differ else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    dump = sub.add_parser("dump", help="the code's estimator fingerprints")
    dump.add_argument("--out", type=Path, default=BEFORE, help=f"where (default {BEFORE.relative_to(REPO)}, issue 59's)")
    cfg = sub.add_parser("configs", help=f"every ENIGMA row's resolved config -> {CONFIGS_BEFORE.relative_to(REPO)}")
    cfg.add_argument("--check", action="store_true", help="compare with the committed reference instead")
    cfg.add_argument("--reference", type=Path, default=CONFIGS_BEFORE, help="--check: the reference to compare with")
    cfg.add_argument("--report", type=Path, default=RESULTS / "refingerprint_configs_check.md", help="--check: where the table goes")
    mig = sub.add_parser("migrate", help="rewrite the saved results' estimator fingerprints")
    mig.add_argument("data_dirs", nargs="+", type=Path, help="pipeline data folders (data/<benchmark>/results...)")
    mig.add_argument("--dry-run", action="store_true", help="count, write nothing")
    mig.add_argument("--before", type=Path, default=BEFORE, help="the fingerprints dump wrote on the code before the change")
    ver = sub.add_parser("verify", help="the train stage's resume path reuses the migrated results")
    ver.add_argument("data", type=Path, help="the pipeline data folder with the benchmarks' stores, targets and rollouts")
    ver.add_argument("--results", type=Path, default=None, help="where the results folders are (default: DATA)")
    ver.add_argument("--agents", type=int, default=2, help="agents per estimator")
    ver.add_argument("--benchmark", action="append", default=None, help="only these benchmarks")
    fr = sub.add_parser("fresh", help="one carried-over result against a fresh run of today's code")
    fr.add_argument("benchmark")
    fr.add_argument("estimator", help="its params.yaml name, e.g. enigma-weighted")
    fr.add_argument("agent")
    fr.add_argument("--main", dest="full", action="store_false", help="the saved result is in results (default: results_full)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from provenance import code_version

    if args.mode == "dump":
        args.out.write_text(json.dumps({"code": code_version(), "fingerprints": fingerprints()}, indent=1) + "\n")
        print(f"wrote {args.out}")
    elif args.mode == "configs" and not args.check:
        CONFIGS_BEFORE.write_text(json.dumps({"code": code_version(), "configs": resolved_configs()}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {CONFIGS_BEFORE}")
    elif args.mode == "configs":
        sys.exit(check_configs(args.reference, args.report))
    elif args.mode == "fresh":
        sys.exit(fresh(args.benchmark, args.estimator, args.agent, args.full))
    elif args.mode == "verify":
        report = verify(args.data, args.results or args.data, args.agents, args.benchmark)
        sys.exit(1 if any(c["not reused"] for c in report.values()) or not report else 0)
    else:
        migrate(args.data_dirs, args.dry_run, args.before)


if __name__ == "__main__":
    main()
