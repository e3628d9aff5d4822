"""Estimators from the literature, each implementing ``enigma.contracts.Estimator`` so that the
leave-one-agent-out runner and the report treat them like ENIGMA.

One module per family: ``baselines`` (experience mean, reply length), ``handcrafted`` (See et
al. 2019 features, alone and by ridge), ``spe`` (self-play evaluation reward models),
``overlap`` (BLEU, ROUGE-L), ``bertscore``, ``perplexity``, ``adem``, ``dynaeval``, ``critic``. The
estimator registry (``enigma.estimators``) names them. Shared plumbing: ``dialogues`` (what a regime gives, as dialogues),
``features``, ``calibration`` (score -> rating maps fitted on the other agents), ``config``.
"""
