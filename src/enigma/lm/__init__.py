"""A small causal language model trained by behaviour cloning on a store's agent turns, saved as
ordinary ``hf:`` checkpoint folders: the learned checkpoints a team's training run produces, for
the ``checkpoint_benchmarks`` (issue 72's ``airline-lm``). Nothing here is used by an estimator."""
