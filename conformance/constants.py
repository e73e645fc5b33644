"""The constant-input dimension of the conformance suite: each case with every tensor
argument a constant (a get_attr weight), converted, built and run, against eager float64.

Lowering folds constant-only subgraphs (``fold_constants``), but not every one (an op with
several outputs, a nondeterministic op, one that fails to evaluate), and converters meet
constants mixed with tensors everywhere; so here the case is lowered with its inputs as
placeholders (the op under test stays a node), then each placeholder becomes a get_attr of
the sample value, and the converter receives torch.Tensor constants where it otherwise
receives ITensors. DeBERTa-v2's layer norm over a weight is the model behind it (issue 21)."""

from __future__ import annotations

import torch

import torch_trt_ref  # noqa: F401  (registers the built-in converters)
from torch_trt_ref.build import build_engine
from torch_trt_ref.capture import export_program
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.conversion.interpreter import Interpreter
from torch_trt_ref.conversion.shapes import TensorSpec
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.settings import CompilationSettings, op_name

from .case import Case, W
from .runner import DTYPE_NAMES, OneOp, _eager, _eager64, compare


def constant_cells(case_list: list[Case], per_op: bool = False
                   ) -> list[tuple[str, Case, torch.dtype]]:
    """One cell per case with a static variant (``per_op``: only each op's first such
    case): fp32 where the case has it, else its first dtype (the constant dimension asks
    how converters treat constants, not dtypes)."""
    out, counters = [], {}
    for case in case_list:
        key = op_name(case.target)
        index = counters.get(key, 0)
        counters[key] = index + 1
        if not case.static:  # SymInt ops exist only with symbolic shapes: no constant form
            continue
        if per_op and any(op_name(c.target) == key for _, c, _ in out):
            continue
        dtype = torch.float32 if torch.float32 in case.dtypes else case.dtypes[0]
        sample = case.name or f"s{index}"
        out.append((f"{key}-{sample}-{DTYPE_NAMES[dtype]}-constant", case, dtype))
    return out


def constants_for_inputs(gm: torch.fx.GraphModule, values: list[torch.Tensor]) -> None:
    """Replace ``gm``'s first ``len(values)`` placeholders by get_attr nodes of ``values``."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, value) in enumerate(zip(placeholders, values)):
        name = f"_constant_input_{i}"
        gm.register_buffer(name, value)
        with gm.graph.inserting_before(node):
            const = gm.graph.get_attr(name)
        const.meta = dict(node.meta, param_name=name)
        node.replace_all_uses_with(const)
        gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()


def run_constant_cell(case: Case, dtype: torch.dtype, record: dict | None = None,
                      mixed: bool = False) -> None:
    """Raise when the case, with its tensor arguments as constants (``mixed``: only the
    first, the others network inputs), does not convert, build or match eager (the
    float64 rule, as ``runner.compare``)."""
    module = OneOp(case, dtype)
    tensor_args = [a for _, a in case.tensor_args() if not isinstance(a, W)]
    example = [a.make(dtype, seed=i) for i, a in enumerate(tensor_args)]
    settings = CompilationSettings(min_block_size=1, require_full_compilation=True,
                                   executor="reference", **case.settings)
    gm = lower_program(export_program(module, tuple(example), {}, None), settings)
    kept = example[1:] if mixed else []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][len(example) - len(kept):]
    specs = [TensorSpec(n.name, x.dtype, tuple(x.shape), tuple(x.shape), tuple(x.shape))
             for n, x in zip(placeholders, kept)]
    constants_for_inputs(gm, [x.clone() for x in example[:len(example) - len(kept)]])
    network = Interpreter(gm, specs, settings).run()
    assert op_name(case.target) in network.converters_used, (
        f"{op_name(case.target)} is not in the converted graph (converters used: "
        f"{sorted(network.converters_used)}): a decomposition made this case vacuous")
    engine = build_engine(network, settings)
    got = EngineModule(engine, "reference", "constants", gm)(*kept)
    expected = _eager(case, module, example, dtype)
    leaves, spec = torch.utils._pytree.tree_flatten(expected)
    if len(leaves) == len(network.output_names):  # the engine's flat outputs, structured
        got = torch.utils._pytree.tree_unflatten(
            list(got) if isinstance(got, tuple) else [got], spec)
    try:
        expected64 = _eager64(module, example)
    except (RuntimeError, NotImplementedError, TypeError) as err:
        expected64 = err
    atol, rtol = case.tolerance(dtype)
    compare(got, expected, expected64, atol, rtol, "constants", {} if record is None else record)

