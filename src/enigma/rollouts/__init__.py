"""Rollouts of a target agent with a user model learned from the experience data (information
regime (b), own rollouts), for benchmarks where the agents can run but the true user must not
be used: the simulator's customer is the ground truth there."""
