"""Random ops (rand, randint, bernoulli, dropout in train mode...) and where they run: in a
TensorRT engine a draw is fixed when the engine is built, so the compiled module returns the
same values on every call where eager draws anew (Note [Random ops in an engine])."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..settings import CompilationSettings, op_name

# Note [Random ops in an engine]: the reference executor seeds each fill layer from its name
# (Note [Random fill seed]) and TensorRT documents no seed, so a random op converted into an
# engine gives one draw per compiled module, as Torch-TensorRT's constant folding does. That
# is right for a model whose draws do not matter at inference, and wrong for one that samples
# in forward (noise schedules, stochastic depth, sampling heads). Compile warns, naming each
# such node; ``random_ops_in_torch=True`` keeps them in PyTorch, which draws anew each call.

# Arguments that make an op tagged ``nondeterministic_seeded`` deterministic: attention with
# dropout_p = 0, dropout with train = False.
_DETERMINISTIC = {"dropout_p": 0.0, "train": False}


def is_random(node: Node) -> bool:
    """``node`` draws random values: an ATen op tagged nondeterministic_seeded, unless its
    arguments turn the randomness off (dropout_p=0, train=False)."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    for i, arg in enumerate(target._schema.arguments):
        if arg.name in _DETERMINISTIC:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(
                arg.name, arg.default_value)
            if value == _DETERMINISTIC[arg.name]:
                return False
    return True


def random_reason(node: Node, settings: CompilationSettings) -> str | None:
    """Why a random node stays in PyTorch under ``random_ops_in_torch``, else None."""
    if settings.random_ops_in_torch and is_random(node):
        return "random op kept in PyTorch (random_ops_in_torch=True): it draws anew each call"
    return None


def fixed_draws_warning(nodes: list[Node]) -> str:
    """The compile-time warning for random ``nodes`` that were converted into engines."""
    named = ", ".join(f"{n.name} ({op_name(n.target)}{_where(n)})" for n in nodes)
    return (f"random ops converted into TensorRT engines return the same draw on every call "
            f"of the compiled module (eager draws anew): {named}. Pass "
            f"random_ops_in_torch=True to keep random ops in PyTorch.")


def _where(node: Node) -> str:
    """" in <submodule path>" of the model submodule the node was traced in, if known."""
    stack = node.meta.get("nn_module_stack") or {}
    path = next(reversed(stack.values()), ("",))[0] if stack else ""
    return f" in {path}" if path else ""
