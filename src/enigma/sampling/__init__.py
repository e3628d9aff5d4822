"""Target-action sampling: its settings (``config``), the sampler (``sampler``) and its cache
(``cache``). Nothing is re-exported here: params.yaml's typed root reads ``sampling.config``,
and reading settings must not load the sampler, the agents and the store."""
