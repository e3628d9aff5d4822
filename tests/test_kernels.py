"""enigma.kernels: the AVX2 kernels pinned on every x86-64 machine that has them (the same bits
on another machine), torch's, NumPy's and OpenBLAS's alike, a user's own settings kept, nothing
pinned where AVX2 is missing."""

import os
import subprocess
import sys

from enigma.kernels import PINS, has_avx2, pin_cpu_kernels

AVX2_CPU = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse sse2 avx avx2 fma\n"
OLD_CPU = "processor\t: 0\nflags\t\t: fpu sse sse2 sse4_1 avx\n"


def test_pins_set_as_defaults_on_an_avx2_processor():
    env = {"MKL_CBWR": "COMPATIBLE"}  # the user's own choice is kept
    pinned = pin_cpu_kernels(env, cpuinfo=AVX2_CPU)
    numpy_pins = {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}
    assert env == {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", **numpy_pins}
    assert pinned == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", **numpy_pins}


def test_nothing_pinned_without_avx2():
    env: dict[str, str] = {}
    assert pin_cpu_kernels(env, cpuinfo=OLD_CPU) == {} and env == {}
    assert not has_avx2("no flags line at all") and has_avx2(AVX2_CPU)


def test_import_enigma_pins_before_torch_runs_anything():
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    # what each library says it runs: torch's capability, NumPy's AVX-512 loops (on or off), and
    # the kernel family OpenBLAS loaded (threadpoolctl, scikit-learn's dependency, reads it)
    code = ("import enigma, os, torch, numpy, threadpoolctl; torch.ones(1).sum(); "
            "from numpy._core._multiarray_umath import __cpu_features__ as f; "
            "blas = [i.get('architecture') for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas']; "
            "print(os.environ.get('MKL_CBWR'), torch.backends.cpu.get_cpu_capability(), "
            "any(v for k, v in f.items() if k in ('AVX512_SKX', 'AVX512_ICL', 'AVX512_SPR')), *blas)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    if has_avx2():
        assert out == ["AVX2", "AVX2", "False", "Haswell"]
    else:
        assert out[0] == "None"
