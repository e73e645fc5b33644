"""Loops and conditionals built through TensorRT's Python API, snapshotted and run by the
reference executor, against values worked out by hand from TensorRT's documented semantics
("Working with Loops", "Working with Conditionals")."""

import numpy as np
import pytest
import torch

from torch_trt_ref._trt import make_logger, trt
from torch_trt_ref.runtime.reference.executor import run_snapshot
from torch_trt_ref.runtime.reference.plan import Region, plan
from torch_trt_ref.runtime.snapshot import take_snapshot

SUM, PROD, LESS = (trt.ElementWiseOperation.SUM, trt.ElementWiseOperation.PROD,
                   trt.ElementWiseOperation.LESS)


@pytest.fixture
def net():
    builder = trt.Builder(make_logger())
    yield builder.create_network(0)  # the network lives as long as its builder


def _const(net, values, dtype=np.float32):
    array = np.asarray(values, dtype=dtype)
    return net.add_constant(array.shape, trt.Weights(array)).get_output(0)


def _run(net, outputs, **inputs):
    for tensor in outputs:
        net.mark_output(tensor)
    snapshot = take_snapshot(net, {})
    return run_snapshot(snapshot, {k: torch.as_tensor(v) for k, v in inputs.items()})


def _count_loop(net, n):
    """A loop with a COUNT limit of ``n`` (a network input)."""
    loop = net.add_loop()
    loop.add_trip_limit(n, trt.TripLimit.COUNT)
    return loop


def _concat(loop, tensor, kind, length, axis=0):
    out = loop.add_loop_output(tensor, kind, axis)
    out.set_input(1, length)
    return out.get_output(0)


def test_count_loop_cumulative_sum(net):
    """"RECURRENCE" + "ITERATOR" + "TRIP_LIMIT" COUNT: s_{i+1} = s_i + x[i]; LAST_VALUE is
    the state after the last iteration, CONCATENATE stacks the per-iteration sums and
    REVERSE stacks them last first."""
    x = net.add_input("x", trt.float32, (4, 2))
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    s = loop.add_recurrence(_const(net, [0.0, 0.0]))
    total = net.add_elementwise(s.get_output(0), loop.add_iterator(x).get_output(0), SUM)
    s.set_input(1, total.get_output(0))
    last = loop.add_loop_output(s.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    cat = _concat(loop, total.get_output(0), trt.LoopOutput.CONCATENATE, n)
    rev = _concat(loop, total.get_output(0), trt.LoopOutput.REVERSE, n)
    xs = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    got_last, got_cat, got_rev = _run(net, [last, cat, rev], x=xs,
                                      n=torch.tensor(3, dtype=torch.int32))
    sums = torch.tensor([[1.0, 10.0], [3.0, 30.0], [6.0, 60.0]])
    assert torch.equal(got_last, sums[-1])
    assert torch.equal(got_cat, sums)
    assert torch.equal(got_rev, sums.flip(0))


def test_zero_trip_count_gives_the_initial_value(net):
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    s = loop.add_recurrence(_const(net, [5.0]))
    s.set_input(1, net.add_elementwise(s.get_output(0), _const(net, [1.0]), SUM).get_output(0))
    last = loop.add_loop_output(s.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    (got,) = _run(net, [last], n=torch.tensor(0, dtype=torch.int32))
    assert torch.equal(got, torch.tensor([5.0]))


def test_while_loop_doubles_until_limit(net):
    """"TRIP_LIMIT" WHILE: the bool (v < 100, from the recurrence) is read before each
    iteration; 3 -> 6 -> ... -> 192 stops after 6 doublings."""
    start = net.add_input("start", trt.float32, ())
    loop = net.add_loop()
    v = loop.add_recurrence(start)
    below = net.add_elementwise(v.get_output(0), _const(net, 100.0), LESS).get_output(0)
    loop.add_trip_limit(below, trt.TripLimit.WHILE)
    v.set_input(1, net.add_elementwise(v.get_output(0), _const(net, 2.0), PROD).get_output(0))
    last = loop.add_loop_output(v.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    (got,) = _run(net, [last], start=torch.tensor(3.0))
    assert got.item() == 192.0
    net.unmark_output(last)
    (got,) = _run(net, [last], start=torch.tensor(500.0))  # no iteration at all
    assert got.item() == 500.0


def test_count_and_while_stop_at_the_first(net):
    """With both limits the loop exits when the count is reached or the condition fails."""
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    v = loop.add_recurrence(_const(net, 1.0))
    below = net.add_elementwise(v.get_output(0), _const(net, 10.0), LESS).get_output(0)
    loop.add_trip_limit(below, trt.TripLimit.WHILE)
    v.set_input(1, net.add_elementwise(v.get_output(0), _const(net, 1.0), SUM).get_output(0))
    last = loop.add_loop_output(v.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    (got,) = _run(net, [last], n=torch.tensor(4, dtype=torch.int32))
    assert got.item() == 5.0  # count first: 1 + 4
    net.unmark_output(last)
    (got,) = _run(net, [last], n=torch.tensor(50, dtype=torch.int32))
    assert got.item() == 10.0  # condition first: stops once v reaches 10


def test_reversed_iterator_over_axis_1(net):
    """"ITERATOR" axis=1 reverse=True gives columns count-1, ..., 0; "LOOP_OUTPUT"
    CONCATENATE at axis 1 stacks them back as columns."""
    x = net.add_input("x", trt.float32, (2, 3))
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    column = loop.add_iterator(x, 1, True).get_output(0)
    doubled = net.add_elementwise(column, _const(net, [2.0, 2.0]), PROD).get_output(0)
    out = _concat(loop, doubled, trt.LoopOutput.CONCATENATE, n, axis=1)
    xs = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (got,) = _run(net, [out], x=xs, n=torch.tensor(3, dtype=torch.int32))
    assert torch.equal(got, torch.tensor([[6.0, 4.0, 2.0], [12.0, 10.0, 8.0]]))


def test_recurrences_update_together(net):
    """Fibonacci: a' = b, b' = a + b; every recurrence reads the previous iteration's
    values, whatever order the layers were added in."""
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    a, b = loop.add_recurrence(_const(net, 0.0)), loop.add_recurrence(_const(net, 1.0))
    a.set_input(1, b.get_output(0))
    b.set_input(1, net.add_elementwise(a.get_output(0), b.get_output(0), SUM).get_output(0))
    last = loop.add_loop_output(a.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    (got,) = _run(net, [last], n=torch.tensor(10, dtype=torch.int32))
    assert got.item() == 55.0


def test_invariant_layer_added_inside_the_loop(net):
    """A constant added after the loop's boundary layers, read by the body: the plan runs
    it before the loop (Note [Loop and branch membership])."""
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    s = loop.add_recurrence(net.add_input("s0", trt.float32, ()))
    step = _const(net, 3.0)
    s.set_input(1, net.add_elementwise(s.get_output(0), step, SUM).get_output(0))
    last = loop.add_loop_output(s.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    (got,) = _run(net, [last], n=torch.tensor(4, dtype=torch.int32), s0=torch.tensor(1.0))
    assert got.item() == 13.0


def test_nested_loops_sum_a_matrix(net):
    """An outer loop over rows whose body is an inner loop over the row's elements: the
    inner loop runs afresh (from its initial value) in every outer iteration."""
    x = net.add_input("x", trt.float32, (3, 4))
    rows, cols = net.add_input("rows", trt.int32, ()), net.add_input("cols", trt.int32, ())
    outer = _count_loop(net, rows)
    row = outer.add_iterator(x).get_output(0)
    total = outer.add_recurrence(_const(net, 0.0))
    inner = _count_loop(net, cols)
    row_sum = inner.add_recurrence(_const(net, 0.0))
    element = inner.add_iterator(row).get_output(0)
    row_sum.set_input(1, net.add_elementwise(row_sum.get_output(0), element, SUM).get_output(0))
    done = inner.add_loop_output(row_sum.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    total.set_input(1, net.add_elementwise(total.get_output(0), done, SUM).get_output(0))
    per_row = _concat(outer, done, trt.LoopOutput.CONCATENATE, rows)
    grand = outer.add_loop_output(total.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    xs = torch.arange(12.0).reshape(3, 4)
    got_rows, got_total = _run(net, [per_row, grand], x=xs, rows=torch.tensor(3, dtype=torch.int32),
                               cols=torch.tensor(4, dtype=torch.int32))
    assert torch.equal(got_rows, torch.tensor([6.0, 22.0, 38.0]))
    assert got_total.item() == 66.0
    (top,) = [step for step in plan(take_snapshot(net, {}).layers) if isinstance(step, Region)]
    assert [s.kind for s in top.steps["body"] if isinstance(s, Region)] == ["loop"]


def _if(net, cond, x):
    """then: x * 2, else: x + 10 (different ops per branch)."""
    conditional = net.add_if_conditional()
    conditional.set_condition(cond)
    inside = conditional.add_input(x).get_output(0)
    then = net.add_elementwise(inside, _const(net, [2.0]), PROD).get_output(0)
    other = net.add_elementwise(inside, _const(net, [10.0]), SUM).get_output(0)
    return conditional.add_output(then, other).get_output(0)


@pytest.mark.parametrize("kind", [trt.LoopOutput.CONCATENATE, trt.LoopOutput.REVERSE])
def test_zero_iterations_concatenate_to_an_empty_tensor(net, kind):
    """ILoopOutputLayer's API: the output has the input's dims with the length a (input 1)
    inserted at the axis ([b, c] -> [b, a, c] for axis 1), so a loop that runs no iteration
    with a = 0 gives an empty [2, 0, 3] tensor. Eager torch agrees on such an empty result:
    pdist of one row has no pairs (shape (0,)), the case Torch-TensorRT's pdist loop hits
    (its trip count n(n-1)/2 is 0). Before the fix the executor refused it."""
    x = net.add_input("x", trt.float32, (4, 2, 3))
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    out = _concat(loop, loop.add_iterator(x).get_output(0), kind, n, axis=1)
    (got,) = _run(net, [out], x=torch.randn(4, 2, 3), n=torch.tensor(0, dtype=torch.int32))
    assert got.shape == (2, 0, 3) and got.dtype == torch.float32
    assert torch.nn.functional.pdist(torch.randn(1, 3, dtype=torch.float64)).shape == (0,)


@pytest.mark.parametrize("taken", [True, False])
def test_conditional_picks_a_branch(net, taken):
    """"CONDITION" picks the branch, "CONDITIONAL_INPUT" passes x in, "CONDITIONAL_OUTPUT"
    takes the taken branch's value."""
    cond = net.add_input("cond", trt.bool, ())
    out = _if(net, cond, net.add_input("x", trt.float32, (3,)))
    xs = torch.tensor([1.0, 2.0, 3.0])
    (got,) = _run(net, [out], cond=torch.tensor(taken), x=xs)
    assert torch.equal(got, xs * 2 if taken else xs + 10)


def test_only_the_taken_branch_runs(net):
    """The else-branch's layers are not executed when the condition is true."""
    cond = net.add_input("cond", trt.bool, ())
    out = _if(net, cond, net.add_input("x", trt.float32, (3,)))
    net.mark_output(out)
    values: dict = {}
    run_snapshot(take_snapshot(net, {}), {"cond": torch.tensor(True),
                                          "x": torch.tensor([1.0, 2.0, 3.0])}, values)
    (region,) = [s for s in plan(take_snapshot(net, {}).layers) if isinstance(s, Region)]
    (else_add,) = region.steps["else"]
    assert else_add.attrs["op"] == "SUM" and else_add.outputs[0].name not in values


def test_conditional_inside_a_loop(net):
    """Each iteration branches on its own element: add odd-indexed (cond true) elements,
    subtract the others."""
    x = net.add_input("x", trt.float32, (4,))
    flags = net.add_input("flags", trt.bool, (4,))
    n = net.add_input("n", trt.int32, ())
    loop = _count_loop(net, n)
    s = loop.add_recurrence(_const(net, 0.0))
    element = loop.add_iterator(x).get_output(0)
    conditional = net.add_if_conditional()
    conditional.set_condition(loop.add_iterator(flags).get_output(0))
    e = conditional.add_input(element).get_output(0)
    plus = net.add_elementwise(s.get_output(0), e, SUM).get_output(0)
    minus = net.add_elementwise(s.get_output(0), e, trt.ElementWiseOperation.SUB).get_output(0)
    s.set_input(1, conditional.add_output(plus, minus).get_output(0))
    last = loop.add_loop_output(s.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    (got,) = _run(net, [last], x=torch.tensor([1.0, 2.0, 4.0, 8.0]),
                  flags=torch.tensor([True, False, True, True]),
                  n=torch.tensor(4, dtype=torch.int32))
    assert got.item() == 1.0 - 2.0 + 4.0 + 8.0


def test_concatenate_length_must_match_the_trip_count(net):
    """Note [Concatenation length]: the reference refuses a length TensorRT leaves
    unspecified."""
    x = net.add_input("x", trt.float32, (4,))
    n, length = net.add_input("n", trt.int32, ()), net.add_input("length", trt.int32, ())
    loop = _count_loop(net, n)
    out = _concat(loop, loop.add_iterator(x).get_output(0), trt.LoopOutput.CONCATENATE, length)
    with pytest.raises(ValueError, match="iterations ran"):
        _run(net, [out], x=torch.zeros(4), n=torch.tensor(2, dtype=torch.int32),
             length=torch.tensor(3, dtype=torch.int32))


@pytest.mark.parametrize("taken", [True, False])
def test_loop_inside_a_branch(net, taken):
    """then: a loop summing x's elements (x passed in through "CONDITIONAL_INPUT");
    else: x's first element. The loop runs only when its branch is taken."""
    cond = net.add_input("cond", trt.bool, ())
    x = net.add_input("x", trt.float32, (3,))
    n = net.add_input("n", trt.int32, ())
    conditional = net.add_if_conditional()
    conditional.set_condition(cond)
    inside = conditional.add_input(x).get_output(0)
    loop = _count_loop(net, n)
    s = loop.add_recurrence(_const(net, 0.0))
    element = loop.add_iterator(inside).get_output(0)
    s.set_input(1, net.add_elementwise(s.get_output(0), element, SUM).get_output(0))
    total = loop.add_loop_output(s.get_output(0), trt.LoopOutput.LAST_VALUE).get_output(0)
    first = net.add_slice(inside, (0,), (1,), (1,)).get_output(0)
    first = net.add_shuffle(first)
    first.reshape_dims = ()
    out = conditional.add_output(total, first.get_output(0)).get_output(0)
    net.mark_output(out)
    values: dict = {}
    (got,) = run_snapshot(take_snapshot(net, {}), {
        "cond": torch.tensor(taken), "x": torch.tensor([1.0, 2.0, 4.0]),
        "n": torch.tensor(3, dtype=torch.int32)}, values)
    assert got.item() == (7.0 if taken else 1.0)
    assert (total.name in values) == taken  # the loop's output exists only if its branch ran


def test_while_loop_concatenates_every_iteration(net):
    """A WHILE loop's CONCATENATE output holds one slice per iteration run (halving 40
    while above 4: 40, 20, 10, 5), the length given as input 1."""
    start, length = net.add_input("start", trt.float32, ()), net.add_input("k", trt.int32, ())
    loop = net.add_loop()
    v = loop.add_recurrence(start)
    above = net.add_elementwise(_const(net, 4.0), v.get_output(0), LESS).get_output(0)
    loop.add_trip_limit(above, trt.TripLimit.WHILE)
    v.set_input(1, net.add_elementwise(v.get_output(0), _const(net, 0.5), PROD).get_output(0))
    out = _concat(loop, v.get_output(0), trt.LoopOutput.CONCATENATE, length)
    (got,) = _run(net, [out], start=torch.tensor(40.0), k=torch.tensor(4, dtype=torch.int32))
    assert torch.equal(got, torch.tensor([40.0, 20.0, 10.0, 5.0]))


@pytest.mark.parametrize("outer,inner,expected", [
    (True, True, 2.0 * 3.0), (True, False, 2.0 + 100.0), (False, True, -2.0), (False, False, -2.0)])
def test_nested_conditionals(net, outer, inner, expected):
    """if outer: (if inner: x * 3 else: x + 100) else: -x, with the inner conditional's
    input coming from inside the outer then-branch."""
    c1, c2 = net.add_input("c1", trt.bool, ()), net.add_input("c2", trt.bool, ())
    x = net.add_input("x", trt.float32, ())
    first = net.add_if_conditional()
    first.set_condition(c1)
    x_in = first.add_input(x).get_output(0)
    second = net.add_if_conditional()
    second.set_condition(c2)
    y = second.add_input(x_in).get_output(0)
    times = net.add_elementwise(y, _const(net, 3.0), PROD).get_output(0)
    plus = net.add_elementwise(y, _const(net, 100.0), SUM).get_output(0)
    then = second.add_output(times, plus).get_output(0)
    negated = net.add_unary(x_in, trt.UnaryOperation.NEG).get_output(0)
    out = first.add_output(then, negated).get_output(0)
    (got,) = _run(net, [out], c1=torch.tensor(outer), c2=torch.tensor(inner),
                  x=torch.tensor(2.0))
    assert got.item() == expected


def test_onnx_loop11_inputs_by_position(net):
    """ONNX's test_loop11 (Loop with a trip count and a condition, a final value and a scan
    output) parsed by TensorRT's ONNX parser, against ONNX's expected outputs. The parser
    names the network's condition input after the body's (cond -> cond_in), so inputs are
    fed by position."""
    import onnx.backend.test.case.node as node_cases
    from onnx.backend.test.case.node import loop  # noqa: F401  (records ONNX's Loop cases)

    # collect_testcases() would run every generator of ONNX (~20 s); importing the Loop
    # module records its cases in the same list.
    case = next(c for c in node_cases._NodeTestCases if c.name == "test_loop11")
    parser = trt.OnnxParser(net, make_logger())
    assert parser.parse(case.model.SerializeToString())
    snapshot = take_snapshot(net, {})
    kinds = snapshot.kinds()
    assert kinds["RECURRENCE"] and kinds["LOOP_OUTPUT"] and kinds["TRIP_LIMIT"] == 2
    (data_in, data_out), = case.data_sets
    feeds = {info.name: torch.from_numpy(array).to(info.dtype)
             for info, array in zip(snapshot.inputs, data_in)}
    for expected, got in zip(data_out, run_snapshot(snapshot, feeds)):
        torch.testing.assert_close(got, torch.from_numpy(expected), rtol=case.rtol,
                                   atol=case.atol)


def test_two_loops_sharing_a_name_are_refused(net):
    """The snapshot knows a boundary layer's loop only by name; two loops named alike
    would merge into one, so the plan refuses them."""
    n = net.add_input("n", trt.int32, ())
    outputs = []
    for _ in range(2):
        loop = _count_loop(net, n)
        loop.name = "same"
        s = loop.add_recurrence(_const(net, 0.0))
        s.set_input(1, net.add_elementwise(s.get_output(0), _const(net, 1.0), SUM).get_output(0))
        outputs.append(loop.add_loop_output(s.get_output(0), trt.LoopOutput.LAST_VALUE)
                       .get_output(0))
    with pytest.raises(ValueError, match="share that name"):
        _run(net, outputs, n=torch.tensor(2, dtype=torch.int32))


def test_onnx_rnn_layout_1_network_runs_as_built(net):
    """ONNX's test_simple_rnn_batchwise (RNN, layout=1: X is [batch=3, seq=1, input]) fails
    against ONNX's expected outputs because of the network TensorRT's parser builds, not
    the executor: the network iterates X over axis 0 as if it were the sequence, carrying
    the hidden state from one batch entry to the next. The executor's result equals that
    recurrence computed in float64, h_t = tanh(X[t] W^T + h_{t-1} R^T), and not ONNX's
    independent batch entries tanh(X[b] W^T)."""
    import onnx.backend.test.case.node as node_cases
    from onnx.backend.test.case.node import rnn  # noqa: F401  (records ONNX's RNN cases)

    case = next(c for c in node_cases._NodeTestCases if c.name == "test_simple_rnn_batchwise")
    parser = trt.OnnxParser(net, make_logger())
    assert parser.parse(case.model.SerializeToString())
    snapshot = take_snapshot(net, {})
    (iterator,) = [layer for layer in snapshot.layers if layer.kind == "ITERATOR"]
    assert iterator.attrs["axis"] == 0 and iterator.inputs == ["X"]
    (data_in, data_out), = case.data_sets
    x, w, r = (torch.from_numpy(a) for a in data_in)
    y, _ = run_snapshot(snapshot, {"X": x, "W": w, "R": r})
    h, carried = torch.zeros(1, 4, dtype=torch.float64), []
    for t in range(3):
        h = torch.tanh(x[t].double() @ w[0].double().T + h @ r[0].double().T)
        carried.append(h)
    torch.testing.assert_close(y.double().reshape(3, 4), torch.cat(carried), rtol=1e-5,
                               atol=1e-6)
    expected = torch.from_numpy(data_out[0]).double().reshape(3, 4)
    assert not torch.allclose(y.double().reshape(3, 4), expected, rtol=1e-3, atol=1e-7)
