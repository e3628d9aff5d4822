"""The example nightly report of the README (docs/examples/nightly.md and .html), made by the real
nightly flow on the airline store.

Night 1 scores one new seller (the incumbent); night 2 adds another, which the report ranks and
compares with it, paired. The conformal intervals are calibrated on the airline benchmark's own
leave-one-agent-out results (``data/airline/results``: run ``dvc repro train@airline`` first).
Everything else (work folder, seen-state, MLflow) goes under ``data/work/nightly-example``.

    .venv/bin/python scripts/nightly_example.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
WORK = Path("data/work/nightly-example")
NIGHTS = [{"rule_noise020": "python:enigma.sim.sellers:rule_noise020"},
          {"rule_noise020": "python:enigma.sim.sellers:rule_noise020", "rule_noise060": "python:enigma.sim.sellers:rule_noise060"}]


def main() -> None:
    import os
    import sys

    os.chdir(REPO)
    sys.path.insert(0, str(REPO))  # flows/ is a top-level folder of the repository, not part of the package
    from flows.nightly import nightly

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    params = yaml.safe_load(Path("params.yaml").read_text())
    params["nightly"].update(registry=str(WORK / "agents.yaml"), seen=str(WORK / "seen.json"), work_dir=str(WORK),
                             report_dir=str(WORK / "reports"))
    params["tracking"].update(uri=f"sqlite:///{WORK / 'mlflow.db'}", artifact_root=str(WORK / "mlartifacts"), log_models=False)
    (WORK / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for agents in NIGHTS:
        (WORK / "agents.yaml").write_text(yaml.safe_dump({"agents": agents}))
        out = nightly(str(WORK / "params.yaml"))
        print(out["evaluated"], out["report"])
    dest = REPO / "docs" / "examples"
    dest.mkdir(parents=True, exist_ok=True)
    for suffix in ("md", "html", "json"):
        shutil.copy(WORK / "reports" / f"latest.{suffix}", dest / f"nightly.{suffix}")
    print((dest / "nightly.md").read_text())


if __name__ == "__main__":
    main()
