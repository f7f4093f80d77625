"""bioanon.nettrain: the one seeded training loop, the ArcFace / softmax heads and batched inference."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torchcontract import blobs as _blobs  # noqa: E402

from bioanon.errors import ParameterError  # noqa: E402
from bioanon.nettrain import arcface_head, infer, softmax_head, train_net  # noqa: E402


def _classifier(d: int = 8, classes: int = 4, head: str = "softmax", bn: bool = False):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Linear(d, 16), *([nn.BatchNorm1d(16)] if bn else []), nn.ReLU(), nn.Linear(16, 8)
            )
            self.head = (
                softmax_head(8, classes) if head == "softmax" else arcface_head(8, classes, margin=0.3, scale=16.0)
            )

        def loss(self, x, y):
            return self.head.loss(self.body(x), y)

    return Net()


def _fit(x, y, **kw):
    params = dict(epochs=15, batch_size=32, lr=1e-2, seed=0, threads=1)
    params.update(kw)
    head = params.pop("head", "softmax")
    bn = params.pop("bn", False)
    return train_net(
        lambda: _classifier(x.shape[1], int(y.max()) + 1, head, bn), lambda idx, rng: (x[idx], y[idx]), len(x), **params
    )


def _accuracy(net, x, y) -> float:
    with torch.no_grad():
        return float((net.head(net.body(x)).argmax(1) == y).float().mean())


def test_importing_nettrain_does_not_import_torch():
    code = "import sys, bioanon.nettrain; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("head", ["softmax", "arcface"])
@pytest.mark.parametrize("scheduler", ["cosine", "plateau", "none"])
def test_loss_falls_on_a_separable_problem(head, scheduler):
    x, y = _blobs()
    t = _fit(x, y, head=head, scheduler=scheduler)
    assert [r["epoch"] for r in t.history] == list(range(1, 16))
    assert t.losses[-1] < 0.3 * t.losses[0], t.losses
    assert not t.net.training  # eval mode at the end
    assert _accuracy(t.net, x, y) > 0.95
    if scheduler == "cosine":
        assert t.history[-1]["lr"] < 0.1 * t.history[0]["lr"]


def test_same_seed_same_weights_and_global_state_left_alone():
    x, y = _blobs()
    rng_state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    a = _fit(x, y, epochs=3, bn=True, optimizer="adamw", weight_decay=1e-3).net.state_dict()
    assert torch.equal(torch.random.get_rng_state(), rng_state) and torch.get_num_threads() == threads
    torch.manual_seed(999)  # the caller's global RNG does not matter
    b = _fit(x, y, epochs=3, bn=True, optimizer="adamw", weight_decay=1e-3).net.state_dict()
    c = _fit(x, y, epochs=3, bn=True, optimizer="adamw", weight_decay=1e-3, seed=1).net.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_batch_rng_is_seeded_and_batch_norm_skips_singletons():
    x, y = _blobs(n=65)
    seen: list[tuple[int, float]] = []

    def batch(idx, rng):
        seen.append((len(idx), float(rng.random())))
        return x[idx], y[idx]

    train_net(lambda: _classifier(bn=True), batch, 65, epochs=2, batch_size=32, lr=1e-2, seed=3, threads=1)
    assert [s for s, _ in seen] == [32, 32, 32, 32]  # the 65th sample's batch of one is skipped (batch norm)
    first = list(seen)
    seen.clear()
    train_net(lambda: _classifier(bn=False), batch, 65, epochs=1, batch_size=32, lr=1e-2, seed=3, threads=1)
    assert [s for s, _ in seen] == [32, 32, 1]  # no batch norm: kept
    assert seen[0][1] == first[0][1]  # the augmentation generator is the seeded one


def test_early_stopping_restores_the_best_epoch():
    # validation targets unrelated to the inputs: the validation loss soon rises, so training stops early
    x, y = _blobs(n=120)
    xv, yv = _blobs(n=60, seed=7)
    yv = torch.from_numpy(np.random.default_rng(1).integers(0, 4, 60))
    loss_fn = torch.nn.functional.cross_entropy

    def val(net):
        return loss_fn(net.head(net.body(xv)), yv)

    t = _fit(x, y, epochs=300, lr=3e-2, validation=val, patience=4)
    vals = [r["val_loss"] for r in t.history]
    assert len(t.history) < 300
    assert t.best_epoch == len(t.history) - 4 and vals[t.best_epoch - 1] == min(vals)
    with torch.no_grad():
        assert float(val(t.net)) == pytest.approx(min(vals), rel=1e-6)  # the best weights were restored
    no_restore = _fit(x, y, epochs=300, lr=3e-2, validation=val, patience=4, keep_best=False)
    with torch.no_grad():
        assert float(val(no_restore.net)) > min(vals)


def test_arcface_head_margin():
    head = arcface_head(4, 3, margin=0.5, scale=10.0)
    e = torch.randn(6, 4)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    with torch.no_grad():
        plain = head(e)  # scaled cosine logits
        margin = head(e, y)
    assert plain.shape == (6, 3) and float(plain.abs().max()) <= 10.0 + 1e-5
    cos = plain / 10.0
    expected = 10.0 * torch.cos(torch.acos(cos.clamp(-1 + 1e-7, 1 - 1e-7)) + 0.5)
    rows = torch.arange(6)
    torch.testing.assert_close(margin[rows, y], expected[rows, y])
    other = torch.ones_like(margin, dtype=torch.bool)
    other[rows, y] = False
    torch.testing.assert_close(margin[other], plain[other])
    with torch.no_grad():
        assert float(head.loss(e, y)) > float(torch.nn.functional.cross_entropy(plain, y))


def test_infer_batches_arrays_and_ragged_lists_in_order():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    out = infer(lambda t: t.sum(dim=1, keepdim=True) * 2, x, out_shape=(1,), batch_size=3, threads=1)
    np.testing.assert_array_equal(out[:, 0], x.sum(1) * 2)
    assert infer(lambda t: t, np.zeros((0, 2), np.float32), out_shape=(2,)).shape == (0, 2)
    ragged = [np.full(k, float(k), np.float32) for k in (3, 5, 3, 1, 5, 3)]
    calls = []

    def fn(t):
        calls.append(tuple(t.shape))
        assert not t.requires_grad and torch.is_inference_mode_enabled()
        return t.mean(dim=1, keepdim=True)

    out = infer(fn, ragged, out_shape=(1,), batch_size=2, threads=1)
    np.testing.assert_array_equal(out[:, 0], [3, 5, 3, 1, 5, 3])
    assert sorted(calls) == sorted([(2, 3), (1, 3), (2, 5), (1, 1)])


def test_bad_choices_name_the_method():
    x, y = _blobs(n=10)
    with pytest.raises(ParameterError, match="my.method: parameter 'scheduler' = 'step'"):
        _fit(x, y, scheduler="step", method_id="my.method")
    with pytest.raises(ParameterError, match="parameter 'optimizer' = 'rmsprop'"):
        _fit(x, y, optimizer="rmsprop")


def test_a_non_finite_reduced_precision_loss_trains_again_in_fp32_with_a_warning():
    """CPU bf16 can overflow (seen on AMX CPUs): the run does not go on with a non-finite loss, it says so and
    trains again from the same seed in fp32, giving the fp32 network."""
    x, y = _blobs()

    def overflowing(net, xb, yb):  # a loss that overflows only under autocast, as a bf16 overflow would
        value = net.loss(xb, yb)
        return value * float("inf") if torch.is_autocast_enabled("cpu") else value

    with pytest.warns(RuntimeWarning, match=r"non-finite loss at epoch 1; trained again .* in fp32"):
        t = _fit(x, y, epochs=3, precision="bf16", loss=overflowing)
    assert t.precision == "fp32" and len(t.history) == 3
    assert all(np.isfinite(r["train_loss"]) for r in t.history)
    ref = _fit(x, y, epochs=3, precision="fp32")
    for k, v in ref.net.state_dict().items():
        torch.testing.assert_close(t.net.state_dict()[k], v)
    assert _fit(x, y, epochs=2, precision="bf16").precision == "bf16"  # a finite bf16 run stays bf16


def test_warm_up_raises_the_rate_linearly_then_the_schedule_takes_over():
    x, y = _blobs()
    t = _fit(x, y, epochs=6, warmup=3, scheduler="cosine")
    lrs = [r["lr"] for r in t.history]
    np.testing.assert_allclose(lrs[:3], [1e-2 / 3, 2e-2 / 3, 1e-2])
    assert lrs[3] == pytest.approx(1e-2) and lrs[5] < lrs[4] < lrs[3]  # cosine over the 3 epochs after it


def test_a_training_that_does_not_beat_the_baseline_restarts_from_the_next_seed(caplog):
    """A run whose best loss never beats a trivial answer's is trained again from seed + 1, + 2, ... (bounded); the
    best run is kept and says whether it learned and from which seed."""
    x, y = _blobs()
    baseline = float(np.log(int(y.max()) + 1))  # cross-entropy of the uniform guess

    def build(dead_seeds):
        net = _classifier(x.shape[1], int(y.max()) + 1)
        if torch.initial_seed() in dead_seeds:  # a collapsed start: the features are zeroed, the loss stays put
            net.body[-1].weight.data.zero_()
            net.body[-1].weight.requires_grad_(False)
            net.body[-1].bias.data.zero_()
            net.body[-1].bias.requires_grad_(False)
        return net

    def fit(dead, restarts):
        return train_net(lambda: build(dead), lambda idx, rng: (x[idx], y[idx]), len(x), epochs=4, batch_size=32,
                         lr=1e-2, threads=1, baseline=baseline, restarts=restarts)  # fmt: skip

    with caplog.at_level("WARNING", logger="bioanon.nettrain"):
        t = fit({0}, restarts=2)
    assert t.learned is True and t.seed == 1 and t.best_loss < 0.95 * baseline
    assert sum("did not learn" in r.getMessage() for r in caplog.records) == 1
    assert [(a["seed"], a["epochs"], a["learned"]) for a in t.attempts] == [(0, 4, False), (1, 4, True)]
    assert t.attempts[1]["best_loss"] == t.best_loss and t.attempts[0]["best_loss"] > t.best_loss
    stuck = fit({0, 1, 2, 3}, restarts=2)  # never learns: three runs in all, and it says so
    assert stuck.learned is False and stuck.seed in (0, 1, 2)
    assert [a["seed"] for a in stuck.attempts] == [0, 1, 2] and not any(a["learned"] for a in stuck.attempts)
    assert fit(set(), restarts=2).seed == 0  # a run that learns is never restarted
