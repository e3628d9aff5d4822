"""Do the CPU's kernels move a sentence vector's bits? The same texts encoded under several kernel
settings, each in a fresh process.

Issue 73 made a text's vector a function of the text alone on one machine (``encode_canonical.py``).
On another machine the estimates still moved: on 2026-12-03, on an AMD EPYC with AVX2 and no
AVX-512, ENIGMA's dev-row estimates on airline differed from the committed report's by up to
0.007, and See 2019's retrieval stand-ins' sampled replies differed from dvc.lock's. PyTorch
(ATen), MKL and oneDNN pick their kernels by the processor, and another kernel adds in another
order. The kernels cannot be swapped for another processor's here, but they can be stepped down:
``ATEN_CPU_CAPABILITY=default`` and ``MKL_CBWR=COMPATIBLE`` are the kernels a processor without
AVX2 gets. If those move the bits, so does a processor with AVX-512. ``enigma.kernels`` pins the
AVX2 kernels on every x86-64 machine that has them; the ``pinned`` row checks that this gives
the vectors this machine gives by default (it does not give ENIGMA's estimates' bits:
``kernel_pin_estimate.py``).

    .venv/bin/python studies/cpu_kernels.py [--texts 300]

Output: studies/results/cpu_kernels.md and .json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from encode_canonical import utterances  # noqa: E402
from result_files import write_result  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PINS = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
# name -> the kernel settings in the environment (None: unset); "libraries' choice" leaves them
# unset and runs a matrix product (MKL's sgemm) before enigma is imported, so that MKL and ATen have
# read their environment before enigma's pins could set it. Setting MKL_CBWR at all, even to AUTO,
# turns on MKL's reproducibility mode: the row "MKL_CBWR=AUTO" (until 2026-12-04 mislabelled as
# the libraries' choice; kernel_pin_estimate.py)
SETTINGS = {
    "libraries' choice": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": None, "ONEDNN_MAX_CPU_ISA": None, "first_op": "1"},
    "MKL_CBWR=AUTO": {"MKL_CBWR": "AUTO", "ATEN_CPU_CAPABILITY": None, "ONEDNN_MAX_CPU_ISA": "ALL", "first_op": "1"},
    "pinned (import enigma)": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": None, "ONEDNN_MAX_CPU_ISA": None},
    "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": None, "ONEDNN_MAX_CPU_ISA": None},
    "ATEN_CPU_CAPABILITY=default": {"MKL_CBWR": None, "ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": None},
}

CHILD = """
import json, os, sys, numpy as np
import torch
if sys.argv[4] == "1":
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # ATen chooses its kernels, and MKL reads MKL_CBWR, at their first call
torch.set_num_threads(1)
from enigma.encoders.text_cache import EmbeddingCache
texts = json.load(open(sys.argv[1]))
v = np.asarray(EmbeddingCache(cache_dir=sys.argv[2]).embed(texts), dtype=np.float32)
np.save(sys.argv[3], v)
print(json.dumps({{"capability": torch.backends.cpu.get_cpu_capability(),
                  "env": {{k: os.environ.get(k) for k in {pins!r}}}}}))
"""


def encode_under(setting: dict[str, str | None], texts_file: Path, work: Path, name: str) -> tuple[np.ndarray, dict]:
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    env.update({k: v for k, v in setting.items() if v is not None and k in PINS})
    out = work / f"{abs(hash(name))}.npy"
    with tempfile.TemporaryDirectory(dir=work) as cache:  # an empty cache: every vector computed here
        done = subprocess.run([sys.executable, "-c", CHILD.format(pins=PINS), str(texts_file), cache, str(out),
                               setting.get("first_op", "0")],
                              env=env, capture_output=True, text=True, check=True, cwd=REPO)
    return np.load(out), json.loads(done.stdout.strip().splitlines()[-1])


def cpu_flags() -> list[str]:
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("flags"))
    except (OSError, StopIteration):
        return []
    return sorted(f for f in line.split(":", 1)[1].split() if f.startswith(("avx", "fma", "sse4")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=300)
    ap.add_argument("--tag", default="cpu_kernels")
    args = ap.parse_args()
    texts = utterances(args.texts)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "texts.json").write_text(json.dumps(texts))
        runs = {name: encode_under(s, work / "texts.json", work, name) for name, s in SETTINGS.items()}
    ref = runs["libraries' choice"][0]
    rows = []
    for name, (v, info) in runs.items():
        moved = np.any(v != ref, axis=1)
        rows.append({"setting": name, "capability": info["capability"], "env": info["env"],
                     "sha256": hashlib.sha256(v.tobytes()).hexdigest()[:16], "texts_moved": int(moved.sum()),
                     "max_abs_diff": float(np.abs(v - ref).max())})
    cpu = platform.processor() or platform.machine()
    model = next((x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                  if x.startswith("model name")), cpu) if Path("/proc/cpuinfo").exists() else cpu
    lines = [
        "# The CPU's kernels and a sentence vector's bits",
        "",
        f"`.venv/bin/python studies/cpu_kernels.py --texts {args.texts}`",
        "",
        f"Machine: {model}; flags {', '.join(cpu_flags())}. {len(texts)} See 2019 utterances (minilm), each setting "
        "in a fresh process with an empty embedding cache and one torch thread; compared with the libraries' own "
        "choice of kernels on this machine.",
        "",
        "| setting | ATen kernels | sha256 of the vectors | texts whose vector moved | largest difference |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['setting']} | {r['capability']} | `{r['sha256']}` | {r['texts_moved']} of {len(texts)} | {r['max_abs_diff']:.2e} |"
              for r in rows]
    write_result(args.tag, lines, {"machine": model, "flags": cpu_flags(), "n_texts": len(texts), "rows": rows})


if __name__ == "__main__":
    main()
