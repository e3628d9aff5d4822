"""The ``sample`` section of params.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from enigma.agents.config import AgentSettings


class SampleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n_samples: int = Field(1, ge=1)
    seed: int = 0
    cache_dir: str = "cache/samples"
    # Agent calls per Parquet part: what a crash can lose at most, and how often the cache is written.
    chunk_states: int = Field(32, ge=1)
    # Each logged occurrence of a state gets its own draws; one call covers up to this many replies
    # (occurrences x n_samples) of one state (servers cap n; OpenAI's is 128).
    max_replies_per_call: int = Field(64, ge=1)
    # A run of this many failed states in a row means the agent is down, not unlucky: stop
    # (everything sampled so far is already on disk).
    max_consecutive_errors: int = Field(20, ge=1)
    # Re-ask states whose earlier attempt failed (a rerun after the server came back).
    retry_errors: bool = True
    agents: AgentSettings = AgentSettings()

    def run_options(self) -> dict:
        """Keyword arguments of ``enigma.sampling.run_sampling`` for this section."""
        return {
            "n_samples": self.n_samples, "seed": self.seed, "cache_dir": self.cache_dir, "settings": self.agents,
            "chunk_states": self.chunk_states, "max_replies_per_call": self.max_replies_per_call,
            "max_consecutive_errors": self.max_consecutive_errors, "retry_errors": self.retry_errors,
        }
