"""rand / randn / randint / randperm compiled to TensorRT (IFillLayer RANDOM_*) and run on
the reference executor, judged by their distributions: a random op's values are never
compared with eager's.

Bounds. Each statistic of n = 100,000 draws is allowed 6 standard deviations of its
sampling distribution (two-sided normal tail 2e-9), so a correct converter practically
never fails and a wrong distribution fails by orders of magnitude:
- mean of U(0, 1): sd = sqrt(1/12) / sqrt(n) = 9.1e-4; of N(0, 1): sd = 1 / sqrt(n) = 3.2e-3.
- sample variance: sd = sqrt((mu4 - sigma^4) / n); U(0, 1): mu4 = 1/80, sigma^2 = 1/12,
  sd = 2.4e-4; N(0, 1): mu4 = 3, sd = sqrt(2 / n) = 4.5e-3.
- Kolmogorov-Smirnov distance D_n to the true CDF: P(sqrt(n) D_n > x) <= 2 exp(-2 x^2)
  (Dvoretzky-Kiefer-Wolfowitz), so D_n <= 3 / sqrt(n) fails with probability <= 3e-8.
- counts of each of k equally likely integers: Binomial(n, 1/k), sd = sqrt(n p (1 - p)).
- a random permutation of m: rises (i with p[i] < p[i+1]) have mean (m - 1) / 2 and
  variance (m + 1) / 12; Spearman's rank correlation with the identity has sd
  1 / sqrt(m - 1).
The reference executor seeds each fill layer from its name (Note [Random fill seed]), so a
compiled program draws the same values on every run: the statistics are over the n
values of one draw."""

from __future__ import annotations

import math

import pytest
import torch

import torch_trt_ref
from conformance.cases import random as random_cases
from conformance.runner import OneOp

N = 100_000
SIGMAS = 6


class Draw(torch.nn.Module):
    """Draws ``fn(x)`` where x's first dim gives the draw's size (so it may be dynamic)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def compile_draw(fn, n: int = N, dtype=torch.float32, dynamic: bool = False):
    x = torch.zeros(n, dtype=dtype)
    spec = torch_trt_ref.Input(min_shape=(1,), opt_shape=(n,), max_shape=(n + 10,),
                               dtype=dtype) if dynamic else x
    compiled = torch_trt_ref.compile(Draw(fn), (spec,), min_block_size=1,
                                     require_full_compilation=True, executor="reference")
    return compiled, x


def ks_distance(sample: torch.Tensor, cdf) -> float:
    """sup |empirical CDF - cdf| over the sorted sample (both sides of each step)."""
    x = sample.double().sort().values
    n = x.numel()
    F = cdf(x)
    above = torch.arange(1, n + 1, dtype=torch.float64) / n - F
    below = F - torch.arange(0, n, dtype=torch.float64) / n
    return float(torch.maximum(above, below).max())


def normal_cdf(x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rand_is_uniform_on_unit_interval(dtype):
    compiled, x = compile_draw(lambda x: torch.rand(x.shape[0], dtype=x.dtype), dtype=dtype)
    r = compiled(x)
    assert r.shape == (N,) and r.dtype == dtype
    assert bool((r >= 0).all()) and bool((r < 1).all())  # Note [rand upper bound]
    r = r.double()
    assert abs(r.mean() - 0.5) <= SIGMAS * math.sqrt(1 / 12 / N)
    assert abs(r.var() - 1 / 12) <= SIGMAS * math.sqrt((1 / 80 - 1 / 144) / N)
    # half dtypes round each draw: allow their spacing near 1 on top of the KS bound
    rounding = torch.finfo(dtype).eps
    assert ks_distance(r, lambda v: v.clamp(0, 1)) <= 3 / math.sqrt(N) + rounding


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_randn_is_standard_normal(dtype):
    compiled, x = compile_draw(lambda x: torch.randn(x.shape[0], dtype=x.dtype), dtype=dtype)
    r = compiled(x)
    assert r.shape == (N,) and r.dtype == dtype and bool(torch.isfinite(r).all())
    r = r.double()
    assert abs(r.mean()) <= SIGMAS / math.sqrt(N)
    assert abs(r.var() - 1) <= SIGMAS * math.sqrt(2 / N)
    rounding = torch.finfo(dtype).eps * 4  # the densest half values near |x| ~ 4
    assert ks_distance(r, normal_cdf) <= 3 / math.sqrt(N) + rounding


def test_rand_follows_a_dynamic_size():
    compiled, _ = compile_draw(lambda x: torch.rand(x.shape[0], 3), n=1000, dynamic=True)
    for n in (1, 7, 1010):
        r = compiled(torch.zeros(n))
        assert r.shape == (n, 3) and bool(((r >= 0) & (r < 1)).all())


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_randint_covers_its_range_evenly(dtype):
    low, high = -3, 5
    compiled, x = compile_draw(
        lambda x: torch.randint(low, high, (x.shape[0],), dtype=dtype))
    r = compiled(x)
    assert r.shape == (N,) and r.dtype == dtype
    assert int(r.min()) >= low and int(r.max()) < high
    counts = torch.bincount((r - low).long(), minlength=high - low)
    p = 1 / (high - low)
    sd = math.sqrt(N * p * (1 - p))
    assert counts.numel() == high - low
    assert bool(((counts - N * p).abs() <= SIGMAS * sd).all()), counts.tolist()


def test_randperm_is_a_uniform_looking_permutation():
    m = 3840  # TopK's largest k
    compiled, x = compile_draw(lambda x: torch.randperm(m) + x.shape[0] * 0, n=1,
                               dtype=torch.int64)
    p = compiled(x)
    assert p.dtype == torch.int64 and p.shape == (m,)
    assert torch.equal(p.sort().values, torch.arange(m))
    rises = int((p[1:] > p[:-1]).sum())
    assert abs(rises - (m - 1) / 2) <= SIGMAS * math.sqrt((m + 1) / 12)
    rho = torch.corrcoef(torch.stack([p.double(), torch.arange(m, dtype=torch.float64)]))[0, 1]
    assert abs(float(rho)) <= SIGMAS / math.sqrt(m - 1)


RANDOM_OPS = {torch.ops.aten.rand.default, torch.ops.aten.randn.default,
              torch.ops.aten.randint.default, torch.ops.aten.randint.low,
              torch.ops.aten.randperm.default}


@pytest.mark.parametrize("case", [c for c in random_cases.CASES if c.target in RANDOM_OPS],
                         ids=lambda c: c.op.__name__)
def test_conformance_cases_of_random_ops_return_draw_independent_values(case):
    """Note [Random cases]: the conformance runner compares a cell's outputs with eager by
    value, so a random op's case must return values that do not depend on the draw: the
    same for two different seeds."""
    assert case.op not in RANDOM_OPS, "a random op's output must not be compared by value"
    for dtype in case.dtypes:
        module = OneOp(case, dtype)
        x = [a.make(dtype) for _, a in case.tensor_args()]
        torch.manual_seed(1)
        first = module(*x)
        torch.manual_seed(2)
        second = module(*x)
        for a, b in zip(torch.utils._pytree.tree_leaves(first),
                        torch.utils._pytree.tree_leaves(second)):
            assert torch.equal(a, b)


def test_rank_0_draws_compile_fully_and_lie_in_their_support():
    # tensorrt_rtx's builder fails on a rank-0 random fill (OpInfo's bernoulli and randint
    # samples of shape ()): the converter draws one value and reshapes it.
    class Scalars(torch.nn.Module):
        def forward(self, p):
            return torch.bernoulli(p), torch.randint(3, 10, ()), torch.rand(())

    p = torch.tensor(0.5)
    compiled = torch_trt_ref.compile(Scalars(), [p], min_block_size=1,
                                     require_full_compilation=True)
    bern, ints, unit = compiled(p)
    assert bern.shape == ints.shape == unit.shape == ()
    assert bern.item() in (0.0, 1.0) and ints.dtype == torch.int64 and 3 <= ints.item() < 10
    assert 0.0 <= unit.item() < 1.0
