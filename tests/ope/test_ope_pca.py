"""The fixed PCA of the frozen features (enigma.ope.features.pca_projection)."""

from __future__ import annotations

import pytest
import torch

from enigma.ope.features import exact_principal_axes, pca_projection


def _rows(n: int = 400, d: int = 24, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scales = torch.linspace(3.0, 0.1, d)  # distinct variances: the top axes are well defined
    return torch.randn(n, d, generator=g) * scales @ torch.linalg.qr(torch.randn(d, d, generator=g))[0]


def test_exact_axes_are_the_top_singular_vectors():
    x = _rows()
    x = x - x.mean(0)
    sv, v = exact_principal_axes(x, 5, chunk_rows=64)  # several chunks of the scatter matrix
    _, s_ref, vh = torch.linalg.svd(x.double(), full_matrices=False)
    torch.testing.assert_close(sv.double(), s_ref[:5], rtol=1e-4, atol=1e-6)
    # the same axes up to sign, and each sign fixed by its largest entry
    torch.testing.assert_close((v.double().T @ vh[:5].T).abs(), torch.eye(5, dtype=torch.float64), atol=1e-4, rtol=0)
    assert (v[v.abs().argmax(0), torch.arange(5)] > 0).all()


def test_the_exact_projection_does_not_depend_on_the_seed_and_is_whitened():
    x = _rows()
    a = pca_projection(x.clone(), 6, seed=0, solver="exact")
    b = pca_projection(x.clone(), 6, seed=1, solver="exact")
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a.var(0), torch.ones(6), atol=1e-4, rtol=0)
    # absent samples (zero rows) are left out of the fit and stay out of the centring's reach
    with_blank = torch.cat([x, torch.zeros(3, x.shape[1])])
    c = pca_projection(with_blank.clone(), 6, seed=0, solver="exact")
    torch.testing.assert_close(c[: len(x)], a)


def test_the_randomized_projection_hangs_on_its_seed_where_the_exact_one_does_not():
    # flat spectrum below the top axes, q = k, two power iterations: the regime of the frozen blocks
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2000, 200, generator=g) * torch.cat([torch.full((4,), 5.0), torch.linspace(1.2, 0.8, 196)])
    a = pca_projection(x.clone(), 16, seed=0)
    b = pca_projection(x.clone(), 16, seed=1)
    overlap = torch.linalg.svdvals(torch.linalg.lstsq(a, b).solution)  # how much of b's span a holds
    assert not torch.allclose(a, b, atol=1e-3) and overlap.min() < 0.9
    with pytest.raises(ValueError, match="pca solver"):
        pca_projection(x.clone(), 4, seed=0, solver="svd")
