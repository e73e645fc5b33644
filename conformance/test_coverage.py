"""Coverage against Torch-TensorRT 2.14: every target they convert has a converter here or a
recorded reason it cannot run without a GPU or a plugin (conformance/coverage.py)."""


from .coverage import NOT_HERE, coverage, covered, our_targets


def test_every_unconverted_target_has_a_reason():
    _, missing = coverage()
    unexplained = sorted(t for t, why in missing.items() if why is None)
    assert not unexplained, f"add a converter (or a reason to NOT_HERE) for {unexplained}"


def test_reasons_name_only_targets_we_do_not_convert():
    stale = sorted(t for t in NOT_HERE if covered(t, our_targets()))
    assert not stale, f"these have converters now; drop their NOT_HERE reasons: {stale}"


def test_a_packet_counts_through_its_default_overload():
    assert covered("aten.matmul", {"aten.matmul.default"})
    assert not covered("aten.matmul", {"aten.mm.default"})
    assert covered("aten.relu.default", {"aten.relu.default"})
