"""Custom ops that tests/plugin_script.py compiles into plugin layers; a program saved
there names this module, and loading it imports this module (tests/test_plugin.py)."""

import torch


@torch.library.custom_op("ttr_plugin_example::topk_gather", mutates_args=())
def topk_gather(x: torch.Tensor, k: int) -> torch.Tensor:
    """The k entries of largest magnitude per row, in order: a data-dependent gather."""
    return torch.gather(x, -1, x.abs().topk(k, dim=-1).indices)


@topk_gather.register_fake
def _(x, k):
    return x.new_empty(*x.shape[:-1], k)


@torch.library.custom_op("ttr_plugin_example::sorted_and_scaled", mutates_args=())
def sorted_and_scaled(x: torch.Tensor, y: torch.Tensor, scale: float) -> tuple[
        torch.Tensor, torch.Tensor]:
    """Two outputs from two inputs: x sorted along its last dim, and y * scale."""
    return x.sort(dim=-1).values, y * scale


@sorted_and_scaled.register_fake
def _(x, y, scale):
    return torch.empty_like(x), torch.empty_like(y)


@torch.library.custom_op("ttr_plugin_example::doubled_rows", mutates_args=())
def doubled_rows(x: torch.Tensor) -> torch.Tensor:
    """Its output's first dim is 2 x its input's: no input dim and no constant."""
    return torch.cat([x, x])


@doubled_rows.register_fake
def _(x):
    return x.new_empty(2 * x.shape[0], *x.shape[1:])


class TopK(torch.nn.Module):
    def forward(self, x):
        return torch.relu(topk_gather(torch.sin(x), 3)) * 2.0


class Two(torch.nn.Module):
    """Two plugin calls in one engine, one with two inputs and two outputs."""

    def forward(self, x, y):
        a, b = sorted_and_scaled(torch.cos(x), y + 1.0, 0.5)
        return topk_gather(a - b, 2) + 1.0


class Doubled(torch.nn.Module):
    def forward(self, x):
        return doubled_rows(torch.exp(x)) - 1.0
