"""Target-action sampling and its cache (see ``sampler``)."""

from enigma.sampling.config import SampleConfig
from enigma.sampling.sampler import OUTPUT_SCHEMA, SamplingAborted, SamplingStats, run_sampling, sample_targets

__all__ = ["OUTPUT_SCHEMA", "SampleConfig", "SamplingAborted", "SamplingStats", "run_sampling", "sample_targets"]
