"""A compiled module holds its own weights (design D11), in engines and PyTorch segments,
in every precision: editing the model afterwards does not change the compiled module, and
refit is the way to give it new weights."""

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.runtime.module import EngineModule


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(8 * 6 * 6, 10), torch.nn.ReLU(), torch.nn.Linear(10, 4)).eval()


def _compile(model, x, precision):
    # addmm in PyTorch: the first Linear becomes a PyTorch segment holding weights
    compiled = torch_trt_ref.compile(model, [x], precision=precision, min_block_size=1,
                                     torch_executed_ops={"aten.addmm.default"})
    assert compiled.compile_report.counts["torch"] >= 1
    assert compiled.compile_report.counts["tensorrt"] >= 1
    return compiled


def _storages(compiled) -> set[int]:
    out = {t.untyped_storage().data_ptr() for t in compiled.state_dict().values()}
    for sub in compiled.modules():
        out |= {v.untyped_storage().data_ptr() for v in vars(sub).values()
                if isinstance(v, torch.Tensor)}
        if isinstance(sub, EngineModule):
            out |= {v.untyped_storage().data_ptr() for layer in sub.engine.snapshot.layers
                    for v in layer.attrs.values() if isinstance(v, torch.Tensor)}
    return out


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_editing_the_model_in_place_does_not_change_the_compiled_module(precision):
    model = _model()
    x = torch.randn(2, 3, 8, 8)
    compiled = _compile(model, x, precision)
    before = compiled(x)
    user = {t.untyped_storage().data_ptr() for t in model.state_dict().values()}
    assert not user & _storages(compiled)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.mul_(1.5).add_(0.25)  # variances stay positive
    assert torch.equal(compiled(x), before)
    # refit is how new weights get in; they are copied too
    torch_trt_ref.refit(compiled, model)
    fresh = _compile(model, x, precision)
    assert torch.equal(compiled(x), fresh(x)) and not torch.equal(compiled(x), before)
    user = {t.untyped_storage().data_ptr() for t in model.state_dict().values()}
    assert not user & _storages(compiled)


def test_the_parallel_copy_gives_what_the_serial_copy_gives(monkeypatch):
    """Above ``_PARALLEL_BYTES`` the storages are copied on several threads (Note [Parallel
    weight copy]); forced on for a small model, the compiled module equals the serially
    copied one, owns every weight, and views of one storage stay views of one copy."""
    from torch_trt_ref import ownership

    model = _model()
    x = torch.randn(2, 3, 8, 8)
    serial = _compile(model, x, "fp32")
    monkeypatch.setattr(ownership, "_PARALLEL_BYTES", 0)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    threads = []
    clone = ownership._clone

    def counted(storage):
        import threading
        threads.append(threading.current_thread().name)
        return clone(storage)

    monkeypatch.setattr(ownership, "_clone", counted)
    parallel = _compile(model, x, "fp32")
    assert threads and all(n.startswith("torch_trt_ref_copy") for n in threads)
    assert torch.equal(parallel(x), serial(x))
    user = {t.untyped_storage().data_ptr() for t in model.state_dict().values()}
    assert not user & _storages(parallel)


def test_views_of_one_storage_share_one_copy_on_either_path(monkeypatch):
    from torch_trt_ref import ownership

    weight = torch.randn(64, 64)
    holder = torch.nn.Module()
    holder.register_buffer("whole", weight)
    holder.register_buffer("rows", weight[8:16])
    holder.register_buffer("transposed", weight.t())
    holder.register_buffer("other", torch.randn(3))
    for parallel_bytes in (2**62, 0):
        monkeypatch.setattr(ownership, "_PARALLEL_BYTES", parallel_bytes)
        monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
        module = torch.nn.Module()
        for name, value in holder.named_buffers():
            module.register_buffer(name, value)
        copied = ownership.own_weights(module, ownership.storages_of([weight]))
        assert copied == weight.untyped_storage().nbytes()
        whole, rows, transposed = module.whole, module.rows, module.transposed
        assert whole.untyped_storage().data_ptr() != weight.untyped_storage().data_ptr()
        assert rows.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
        assert transposed.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
        assert torch.equal(rows, weight[8:16]) and torch.equal(transposed, weight.t())
        assert module.other is holder.other  # not the caller's: left as it is
