"""The request block of the frozen encoder (``dice.request``): how close each reply is to the
user's opening request (``request_features``)."""

from __future__ import annotations

import torch

from enigma.encoders.text_tokens import f1, words

# per reply: the cosine of its sentence vector with the opening request's, and their word F1
REQUEST_MEASURES = ("cosine", "words")
REQUEST_DIM = len(REQUEST_MEASURES)


def request_features(
    vectors: torch.Tensor,
    texts: list[str],
    first_user: torch.Tensor,
    logged: torch.Tensor,
    target: torch.Tensor,
    target_valid: torch.Tensor,
) -> torch.Tensor:
    """How close each reply is to the user's opening request (``REQUEST_MEASURES``), laid out as
    [T, 1 + S, REQUEST_DIM]: the logged reply, then each target sample (zeros where there is none).

    A task dialogue's first user turn states what the user wants ("please cancel my
    reservation"), and whether the final action does that is a comparison of two texts. Given the
    request as a block of 384 dimensions, the PCA and the heads did not form that comparison
    (``studies/results/ope_first_user_airline.md``); given here as two numbers per pair, a
    linear head can read it. Zeros where the dialogue has no non-blank user turn before the reply.
    ``vectors`` and ``texts`` are indexed by embedding row (row 0 the blank)."""
    t_all, s_max = target.shape
    out = torch.zeros((t_all, 1 + s_max, REQUEST_DIM), dtype=torch.float32)
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    tokens = {0: []}

    def measure(reply: int, request: int) -> list[float]:
        for r in (reply, request):
            if r not in tokens:
                tokens[r] = words(texts[r])
        cos = float(unit[reply] @ unit[request]) if reply and request else 0.0
        return [cos, f1(tokens[reply], tokens[request]) if reply else 0.0]

    for r in range(t_all):
        request = int(first_user[r])
        if not request:
            continue
        out[r, 0] = torch.tensor(measure(int(logged[r]), request))
        for s in range(s_max):
            if bool(target_valid[r, s]):
                out[r, 1 + s] = torch.tensor(measure(int(target[r, s]), request))
    return out
