"""ENIGMA: automatic evaluation of dialogue agents by model-free off-policy evaluation."""

import os as _os

# The project runs offline by design: no model hub, no analytics. These are defaults, so a
# user can still override any of them in the environment.
for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DVC_NO_ANALYTICS": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "GX_ANALYTICS_ENABLED": "false",
}.items():
    _os.environ.setdefault(_key, _value)

from enigma.kernels import pin_cpu_kernels as _pin_cpu_kernels

_pin_cpu_kernels()  # before torch runs anything: the AVX2 kernels on every x86-64 machine with AVX2

__version__ = "0.1.0"
