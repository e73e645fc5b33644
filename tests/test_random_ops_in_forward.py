"""Random ops inside ``forward`` (Note [Random ops in an engine]): converted into an engine
they return the same draw on every call, and compile warns naming the nodes;
``random_ops_in_torch=True`` keeps them in PyTorch, which draws anew each call."""

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.settings import CompilationSettings


class Sampler(torch.nn.Module):
    """Samples in forward: uniform noise, a Bernoulli mask (decomposed to rand), randint."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.proj(x) + torch.rand(4, 8)
        mask = torch.bernoulli(torch.sigmoid(y))
        return y * mask + torch.randint(0, 5, (4, 8)).float()


def test_random_ops_in_an_engine_warn_naming_the_nodes_and_draw_once():
    model = Sampler().eval()
    with pytest.warns(UserWarning, match="same draw on every call") as record:
        compiled = torch_trt_ref.compile(model, [torch.randn(4, 8)], min_block_size=1)
    message = " ".join(str(w.message) for w in record if "same draw" in str(w.message))
    assert "aten.rand.default" in message and "aten.randint.low" in message
    assert "random_ops_in_torch=True" in message
    x = torch.randn(4, 8)
    assert torch.equal(compiled(x), compiled(x))


def test_random_ops_in_torch_draw_anew_each_call(recwarn):
    model = Sampler().eval()
    compiled = torch_trt_ref.compile(model, [torch.randn(4, 8)], min_block_size=1,
                                     random_ops_in_torch=True)
    assert not [w for w in recwarn if "same draw" in str(w.message)]
    reasons = compiled.compile_report.support["reasons"]
    assert any("random_ops_in_torch" in r for why in reasons.values() for r in why)
    x = torch.randn(4, 8)
    first, second = compiled(x), compiled(x)
    assert not torch.equal(first, second)
    assert compiled.compile_report.counts["tensorrt"] >= 1  # the linear still converts


def test_random_ops_in_torch_is_validated():
    with pytest.raises(ValueError, match="random_ops_in_torch must be True or False"):
        CompilationSettings(random_ops_in_torch="yes")


def test_eval_dropout_and_attention_without_dropout_are_not_random():
    class Block(torch.nn.Module):
        def forward(self, q):
            a = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.0)
            return torch.nn.functional.dropout(a, 0.5, training=False) * 2

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        torch_trt_ref.compile(Block().eval(), [torch.randn(1, 2, 4, 8)], min_block_size=1)
