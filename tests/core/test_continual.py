"""Continual-learning metrics against hand-computed matrices; the MLP; training a task on fit with its hook, replay
and masked heads; the compute counter."""

import numpy as np
import pytest
import torch

from lab.core import continual as C
from lab.datasets.streams import ReplayBuffer, task_stream

# R[i, j]: accuracy on task j after training task i (3 tasks)
R = np.array([[90.0, 10.0, 20.0],
              [70.0, 80.0, 15.0],
              [60.0, 75.0, 85.0]])
B = np.array([10.0, 12.0, 11.0])  # a random-init model on each task


def test_metrics_by_hand():
    assert C.acc(R) == pytest.approx((60 + 75 + 85) / 3)
    assert C.bwt(R) == pytest.approx(((60 - 90) + (75 - 80)) / 2)  # -17.5
    assert C.fwt(R, B) == pytest.approx(((10 - 12) + (15 - 11)) / 2)  # 1.0
    np.testing.assert_array_equal(C.plasticity(R), [90, 80, 85])
    assert C.forgetting(R) == pytest.approx(((90 - 60) + (80 - 75)) / 2)
    m = C.metrics(R, B)
    assert (m.acc, m.bwt, m.fwt, m.plasticity) == pytest.approx((220 / 3, -17.5, 1.0, 85.0))
    assert np.isnan(C.metrics(R).fwt)


def test_forgetting_uses_the_best_earlier_accuracy_and_bwt_the_first():
    Q = np.array([[50.0, 0, 0], [70.0, 60, 0], [65.0, 55, 40]])
    assert C.bwt(Q) == pytest.approx(((65 - 50) + (55 - 60)) / 2)  # +5: task 0 improved after its training
    assert C.forgetting(Q) == pytest.approx(((70 - 65) + (60 - 55)) / 2)  # 5: from the best, not the first


def test_no_forgetting_and_one_task():
    eye = np.tril(np.full((4, 4), 80.0))  # every task kept at 80 after its training
    assert C.bwt(eye) == 0 and C.forgetting(eye) == 0 and C.acc(eye) == 80
    one = np.array([[42.0]])
    assert (C.acc(one), C.bwt(one), C.fwt(one, [5.0]), C.forgetting(one)) == (42.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="square"):
        C.acc(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="one value per task"):
        C.fwt(R, [1.0, 2.0])


def test_mlp_shapes_and_layer_inputs():
    torch.manual_seed(0)
    m = C.MLP(40, (16, 8), 10)
    assert [tuple(layer.weight.shape) for layer in m.layers] == [(16, 40), (8, 16), (10, 8)]
    assert all(layer.bias is None for layer in m.layers)
    x = torch.randn(5, 40)
    ins = m.layer_inputs(x)
    assert [tuple(a.shape) for a in ins] == [(5, 40), (5, 16), (5, 8)]
    torch.testing.assert_close(ins[0], x)
    torch.testing.assert_close(m(x), ins[2] @ m.layers[2].weight.T)
    assert (ins[1] >= 0).all()  # after a ReLU


@pytest.fixture(scope="module")
def stream():
    return task_stream("split", "digits", n_tasks=3, class_order=tuple(range(10)))


def test_train_task_learns_with_the_hook_and_counts_compute(stream):
    torch.manual_seed(0)
    model = C.MLP(stream.d_input, (32,), 10)
    calls = []
    compute = C.Compute()
    res = C.train_task(model, stream, 0, epochs=3, lr=1e-2, on_step=lambda s, m, o: calls.append(s))
    compute += res
    compute.timed(lambda: sum(range(1000)))
    assert calls == list(range(1, res.steps + 1)) and compute.steps == res.steps
    assert compute.wall_s >= res.wall_time_s > 0
    row = C.evaluate_stream(model, stream)
    assert row.shape == (3,) and row[0] > 95  # 0 vs 1 is easy
    assert row[1] == 0 and row[2] == 0  # an all-classes head never predicts classes it was not trained on


def test_heads_mask_the_logits(stream):
    torch.manual_seed(0)
    model = C.MLP(stream.d_input, (32,), 10)
    C.train_task(model, stream, 0, epochs=3, lr=1e-2)
    C.train_task(model, stream, 1, epochs=3, lr=1e-2, head="task")
    # trained with the task-1 logits only, the model still scores task 0 well when only its classes are allowed
    assert C.evaluate_task(model, stream, 0, head="task") > 90
    assert C.evaluate_task(model, stream, 2, head="seen", after=1) == 0  # classes 4, 5 not seen yet
    with pytest.raises(ValueError, match="^head="):
        C.train_task(model, stream, 0, head="multi")


def test_replay_reduces_forgetting(stream):
    rows = {}
    for share in (0.0, 0.5):
        torch.manual_seed(0)
        model = C.MLP(stream.d_input, (32,), 10)
        buf = ReplayBuffer(share, seed=0)
        for t in range(3):
            C.train_task(model, stream, t, epochs=3, lr=1e-2, replay=buf, head="seen")
            buf.add_task(stream[t])
        rows[share] = C.evaluate_stream(model, stream, head="seen", after=2)
    assert rows[0.0][:2].max() < 20  # class-incremental fine-tuning forgets everything but the last task
    assert rows[0.5][:2].min() > 80


def test_steps_give_an_equal_budget(stream):
    model = C.MLP(stream.d_input, (8,), 10)
    assert C.train_task(model, stream, 0, steps=7).steps == 7
