"""Stage the folder that a lent GPU machine (the ``device`` tool) needs for the guide's GPU checks:
the default ENIGMA on a benchmark with ``dice.device`` cuda and cpu (``studies/device/ope.sh``), and
``enigma sample`` with ``hf:`` checkpoints there (``studies/device/hf.sh``).

That machine has its own Python (3.12, torch, transformers), no network and no project
environment, and one call carries at most 64 MiB. So this writes, into ``--out`` (``.gpu``, which
``.git/info/exclude`` must list):

- ``minilm/``: the packaged MiniLM with its weights rounded to float16 (45 MB instead of 91; the
  device's ``setup.sh`` turns them back into float32 as the package's own folder);
- ``targets/``: the benchmark's sampled target actions cut to the columns that the estimator and the
  result fingerprint read (``enigma.evaluation.fingerprints.target_fingerprint``), zstd-compressed,
  so the results' fingerprints are the uncut tables';
- ``smol/``: SmolLM2-135M's config and tokenizer, no weights (94 MB do not travel): ``hf.sh`` gives
  the architecture random weights, which time an upper bound (a random model seldom stops before
  ``max_new_tokens``);
- the scripts of ``studies/device/``; and, into ``--wheels`` (``.whl``), the wheels for Python 3.12
  of the packages the device's image lacks, at this environment's versions.

    .venv/bin/python studies/device_stage.py airline    # after `dvc repro sample@airline`

The call carries ``.whl``, ``.gpu`` and the benchmark's ``store``, ``truth.parquet`` and
``rollouts``; the tracked tree must leave room (on 2026-12-05: 57 MB carried, so ``reports/``,
``docs/``, ``studies/results/`` and ``data/raw/`` were moved out for the call and back after).
Results: ``studies/results/ope_devices_gpu_2026-12-05.json`` and ``ope_devices_*``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_COLUMNS = ("dialog_id", "turn_index", "sample_index", "text", "error", "source_context")
# what the device image lacks or holds at another version (its package list: the device tool's KINDS.md)
WHEELS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "nltk", "typing-extensions")
BUILT_WHEELS = ("rouge-score",)  # published as a source distribution only: built here
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def half_precision_weights(src: Path, dst: Path) -> None:
    """The model's floating tensors rounded to float16; integer ones (position ids) as they are."""
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(src)
    save_file({k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in weights.items()}, dst)


def cut_targets(src: Path, dst: Path) -> None:
    """One target-actions file cut to TARGET_COLUMNS, its schema's metadata kept."""
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    pq.write_table(table.select([c for c in TARGET_COLUMNS if c in table.column_names]), dst,
                   compression="zstd", compression_level=19)


def _wheels(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in WHEELS]
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.12", "--implementation", "cp", *platforms, "-d", str(out), *pins], check=True)
    built = [f"{name}=={importlib.metadata.version(name)}" for name in BUILT_WHEELS]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), *built], check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark", help="whose target actions travel (data/<benchmark>/targets)")
    ap.add_argument("--out", type=Path, default=REPO / ".gpu")
    ap.add_argument("--wheels", type=Path, default=REPO / ".whl")
    args = ap.parse_args()

    from enigma.agents.hf import convert_gguf
    from enigma.comparators.perplexity import packaged_smollm2
    from enigma.encoders.weights import resolve_weights

    args.out.mkdir(parents=True, exist_ok=True)
    minilm = resolve_weights("minilm")
    shutil.copytree(minilm, args.out / "minilm", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("model.safetensors", "README.md", "data_config.json"))
    half_precision_weights(minilm / "model.safetensors", args.out / "minilm" / "model16.safetensors")

    targets = REPO / "data" / args.benchmark / "targets"
    if not targets.is_dir():
        sys.exit(f"{targets}: missing; run `dvc repro sample@{args.benchmark}` first")
    (args.out / "targets").mkdir(exist_ok=True)
    for f in sorted(targets.glob("*.parquet")):
        cut_targets(f, args.out / "targets" / f.name)

    smol = convert_gguf(packaged_smollm2(), REPO / "cache" / "hf-converted")
    (args.out / "smol").mkdir(exist_ok=True)
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(smol / name, args.out / "smol" / name)

    for script in (REPO / "studies" / "device").iterdir():
        shutil.copy(script, args.out / script.name)
    _wheels(args.wheels)
    size = sum(f.stat().st_size for d in (args.out, args.wheels) for f in d.rglob("*") if f.is_file())
    print(f"{args.out} and {args.wheels}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
