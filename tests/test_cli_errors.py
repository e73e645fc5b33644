"""The command line: every mistake is one line on stderr and exit code 2, never a
traceback; every command and option has help text."""

import argparse

import pytest

from torch_trt_ref import cli
from zoo import model_commands


def _run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err.strip().splitlines()[-1] if captured.err.strip() else ""


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(
        "import torch\n\n"
        "def broken():\n"
        "    raise RuntimeError('weights not found')\n\n"
        "def lonely():\n"
        "    return torch.nn.ReLU()\n\n"
        "def not_a_model():\n"
        "    return 42, (torch.ones(1),)\n\n"
        "LIMIT = 3\n")
    return path


def test_missing_file(capsys, tmp_path):
    code, err = _run(capsys, "compile", f"{tmp_path}/nope.py:make")
    assert code == 2
    assert err == f"error: model '{tmp_path}/nope.py:make': no such file '{tmp_path}/nope.py'"


@pytest.mark.parametrize("spec", ["model.py", "model.py:", ":make", "model.py:not-a-name"])
def test_malformed_spec(capsys, spec):
    code, err = _run(capsys, "compile", spec)
    assert code == 2
    assert err.startswith(f"error: model {spec!r}: expected a zoo model name (torch-trt-ref "
                          "zoo list) or path/to/file.py:factory")


def test_missing_factory(capsys, user_file):
    code, err = _run(capsys, "compile", f"{user_file}:make")
    assert code == 2
    assert err.endswith(f"{user_file} has no function 'make'; functions there: broken, "
                        "lonely, not_a_model")


def test_factory_raising(capsys, user_file):
    code, err = _run(capsys, "compile", f"{user_file}:broken")
    assert code == 2
    assert err.endswith("broken() raised RuntimeError: weights not found")


@pytest.mark.parametrize("factory, message", [
    ("lonely", "lonely() returned ReLU; expected (model, inputs) or (model, inputs, "
               "kwarg_inputs)"),
    ("not_a_model", "not_a_model() returned a int as the model; expected a torch.nn.Module "
                    "(or a function of tensors)"),
])
def test_factory_returning_the_wrong_thing(capsys, user_file, factory, message):
    code, err = _run(capsys, "compile", f"{user_file}:{factory}", "--dryrun")
    assert code == 2 and message in err


def test_file_that_fails_to_import(capsys, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import torch\ndef make(:\n")
    code, err = _run(capsys, "debug", f"{path}:make")
    assert code == 2 and f"importing {path} raised SyntaxError" in err


def test_unknown_zoo_model(capsys):
    code, err = _run(capsys, "compile", "resnet_18")
    assert code == 2 and err.startswith("error: no zoo model 'resnet_18'; known models: ")


def test_cache_dir_that_is_a_file(capsys, tmp_path):
    path = tmp_path / "a_file"
    path.write_text("")
    code, err = _run(capsys, "compile", "resnet18", "--cache-dir", str(path))
    assert code == 2
    assert err == f"error: --cache-dir {path}: is a file; give a directory (created when missing)"


def test_zoo_report_of_a_missing_file(capsys, tmp_path):
    code, err = _run(capsys, "zoo", "report", str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert err == (f"error: {tmp_path}/missing.jsonl: no such file; expected a JSON-lines file "
                   "of zoo records (written by `torch-trt-ref zoo run --out FILE`)")


def test_zoo_report_of_a_file_that_is_not_records(capsys, tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("hello\n")
    code, err = _run(capsys, "zoo", "report", str(path))
    assert code == 2 and err.startswith(f"error: {path}:1: not a JSON record")


def test_onnx_of_a_missing_file(capsys, tmp_path):
    code, err = _run(capsys, "onnx", str(tmp_path / "missing.onnx"))
    assert code == 2 and str(tmp_path / "missing.onnx") in err


def test_unexpected_errors_name_their_type_and_the_traceback_option(capsys, monkeypatch):
    def boom(args):
        raise RuntimeError("the builder crashed")

    monkeypatch.setattr(model_commands, "_compile_command", boom)  # the zoo registers it
    code, err = _run(capsys, "compile", "resnet18")
    assert code == 2
    assert err == ("error: RuntimeError: the builder crashed (rerun with --traceback for the "
                   "full traceback)")
    with pytest.raises(RuntimeError, match="the builder crashed"):
        cli.main(["--traceback", "compile", "resnet18"])


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _walk(parser, path=()):
    yield path, parser
    sub = _subparsers(parser)
    if sub is not None:
        for name, child in sub.choices.items():
            yield from _walk(child, path + (name,))


def test_every_command_and_option_has_help():
    parser = cli.build_parser()
    seen = []
    for path, p in _walk(parser):
        seen.append(" ".join(path))
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                listed = {a.dest for a in action._choices_actions}
                assert listed == set(action.choices), f"{path}: commands without help"
                assert all(a.help for a in action._choices_actions), path
                help_text = p.format_help()
                assert all(name in help_text for name in action.choices), path
            elif not isinstance(action, argparse._HelpAction):
                assert action.help, f"torch-trt-ref {' '.join(path)} {action.dest}: no help"
    assert {"compile", "debug", "onnx", "zoo", "zoo run", "zoo report", "zoo compare",
            "zoo list", "zoo anchors"} <= set(seen)


def test_ctrl_c_is_one_line_and_exit_code_130(capsys):
    """A command interrupted by Ctrl-C (e.g. a zoo sweep, which has already said what it
    cancelled and kept) ends with "interrupted" and 130, not a traceback."""
    from torch_trt_ref.commands import run_reporting_errors

    def interrupted(args):
        raise KeyboardInterrupt

    assert run_reporting_errors(interrupted, None) == 130
    assert capsys.readouterr().err == "interrupted\n"
    with pytest.raises(KeyboardInterrupt):
        run_reporting_errors(interrupted, None, traceback=True)
