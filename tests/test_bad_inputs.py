"""Bad input to ``compile`` and to a compiled module: a clear error naming what was wrong
and what is accepted (or, for a bare tensor, a function or train mode, the documented
behaviour)."""

import warnings

import pytest
import torch

import torch_trt_ref as ttr


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, scale=None):
        y = self.drop(self.linear(x))
        return y if scale is None else y * scale


@pytest.fixture(scope="module")
def compiled():
    """Compiled for float32 x (positional) and scale (keyword)."""
    model = Affine().eval()
    return ttr.compile(model, (torch.randn(2, 4),), {"scale": torch.ones(2, 3)},
                       min_block_size=1), model


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
def test_input_of_another_dtype_is_an_error(compiled, dtype):
    module, model = compiled
    x = torch.randn(2, 4).to(dtype)
    with pytest.raises(RuntimeError):  # what eager does with it
        model(x, scale=torch.ones(2, 3))
    with pytest.raises(TypeError, match=rf"input 'x': got a {dtype} tensor, but the module "
                       r"was compiled for torch.float32. Pass a torch.float32 tensor"):
        module(x, scale=torch.ones(2, 3))


def test_keyword_input_of_another_dtype_is_an_error(compiled):
    module, model = compiled
    x = torch.randn(2, 4)
    with pytest.raises(TypeError, match=r"input 'scale': got a torch.float64 tensor, but the "
                       r"module was compiled for torch.float32"):
        module(x, scale=torch.ones(2, 3, dtype=torch.float64))
    torch.testing.assert_close(module(x, scale=torch.ones(2, 3)), model(x, scale=torch.ones(2, 3)))


def test_inputs_none_is_an_error():
    with pytest.raises(TypeError, match=r"inputs: got None; compile needs example inputs: a "
                       r"tuple or list of tensors or torch_trt_ref.Input specs"):
        ttr.compile(Affine().eval(), None)


def test_inputs_of_a_wrong_type_are_an_error():
    with pytest.raises(TypeError, match=r"inputs: got a dict.*kwarg_inputs="):
        ttr.compile(Affine().eval(), {"x": torch.randn(2, 4)})
    with pytest.raises(TypeError, match=r"kwarg_inputs: got a tuple; expected a dict"):
        ttr.compile(Affine().eval(), (torch.randn(2, 4),), (torch.ones(2, 3),))


def test_inputs_that_do_not_fit_forward_are_an_error():
    three = (torch.randn(2, 4), torch.ones(2, 3), torch.ones(1))
    with pytest.raises(TypeError, match=r"the example inputs do not fit Affine.forward\(x, "
                       r"scale=None\): too many positional arguments"):
        ttr.compile(Affine().eval(), three)


def test_a_bare_tensor_is_a_one_tuple():
    model, x = Affine().eval(), torch.randn(2, 4)
    compiled = ttr.compile(model, x, min_block_size=1)
    torch.testing.assert_close(compiled(x), model(x))


def test_a_function_is_compiled_as_a_module_without_weights():
    def gelu_scale(x, y):
        return torch.nn.functional.gelu(x) * y + 1.0

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    compiled = ttr.compile(gelu_scale, (x, y), min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    torch.testing.assert_close(compiled(x, y), gelu_scale(x, y), rtol=1e-5, atol=1e-5)


def test_an_object_that_is_not_a_model_is_an_error():
    with pytest.raises(TypeError, match=r"model: got a str, which cannot be called. Accepted: "
                       r"a torch.nn.Module \(scripted or traced ones too\), a "
                       r"torch.export.ExportedProgram, a TorchScript function, or a Python "
                       r"function"):
        ttr.compile("resnet18", (torch.randn(1, 3, 8, 8),))


def test_train_mode_warns_and_the_model_keeps_its_mode():
    model, x = Affine(), torch.randn(2, 4)  # in train mode: dropout is active
    with pytest.warns(UserWarning, match=r"the model is in train mode: compiled with eval "
                      r"semantics .* the model itself stays in train mode"):
        compiled = ttr.compile(model, (x,), min_block_size=1)
    assert model.training and model.drop.training  # nothing of the user's was changed
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model.linear(x))  # eval: dropout is off
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ttr.compile(model, (x,), min_block_size=1)  # in eval mode: no warning
    model.drop.train()
    with pytest.warns(UserWarning, match=r"submodule drop is in train mode"):
        ttr.compile(model, (x,), min_block_size=1)


def test_cache_dir_that_is_a_file_is_an_error(tmp_path):
    path = tmp_path / "not_a_dir"
    path.write_text("")
    with pytest.raises(ValueError, match=r"engine_cache_dir=.*not_a_dir' is a file; give a "
                       r"directory"):
        ttr.CompilationSettings(engine_cache_dir=str(path))
