"""One traced pass per campaign batch: ``Criterion.update_with_outputs`` gives the state
``update`` gives, the model's own outputs and the last hidden state from the same pass."""
from __future__ import annotations

import numpy as np
import pytest

from rnncon_core.campaign import make_guide
from rnncon_core.coverage import StateCoverage, build_profile
from rnncon_core.coverage.base import forward_outputs


@pytest.fixture(scope="module")
def profiled(tiny_lstm, tiny_gru, tiny_text, tiny_ids):
    rng = np.random.default_rng(5)
    for m in (tiny_lstm, tiny_gru):
        build_profile(m, rng.random((30, 5, 3)).astype("float32"))
    build_profile(tiny_text, rng.integers(0, 20, (30, 6)).astype("int32"))


def _same_state(a, b):
    sa, sb = a.state(), b.state()
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(np.asarray(sa[k]), np.asarray(sb[k]), err_msg=k)


@pytest.mark.parametrize("guide", ["rconc", "nc", "kmnc", "state", "bc"])
@pytest.mark.parametrize("which", ["tiny_lstm", "tiny_gru"])
def test_one_pass_gives_the_state_the_outputs_and_the_hidden_state(guide, which, profiled,
                                                                   request):
    model = request.getfixturevalue(which)
    x = np.random.default_rng(9).random((13, 5, 3)).astype("float32")
    plain, fused = make_guide(guide, model, {}), make_guide(guide, model, {})
    plain.update(x[:6]).update(x[6:])
    fused.update_with_outputs(x[:6])
    out, hidden = fused.update_with_outputs(x[6:])
    _same_state(plain, fused)
    np.testing.assert_array_equal(plain.new_items(6), fused.new_items(6))
    np.testing.assert_allclose(out, np.asarray(model(x[6:])), atol=1e-5)
    sc = StateCoverage(model, profile_inputs="all")
    np.testing.assert_array_equal(sc.states_of_hidden(hidden),
                                  sc.abstract_states(x[6:])[:, -1])
    # without a guide: the same outputs and hidden states
    out2, hidden2 = forward_outputs(model)(x[6:])
    np.testing.assert_allclose(out2, out, atol=1e-6)
    np.testing.assert_allclose(hidden2, hidden, atol=1e-6)


def test_word_ids_and_a_second_state_from_the_same_pass(tiny_text, tiny_ids, profiled):
    guide, delta, plain = (make_guide("rconc", tiny_text, {}) for _ in range(3))
    out, hidden = guide.update_with_outputs(tiny_ids, also=(delta,))
    plain.update(tiny_ids)
    _same_state(plain, guide)
    _same_state(plain, delta)
    assert delta.n_inputs == len(tiny_ids)
    np.testing.assert_allclose(out, np.asarray(tiny_text(tiny_ids)), atol=1e-5)
    assert hidden.shape == (len(tiny_ids), 4)


def test_new_items_counts_what_each_input_covered_first(tiny_lstm, profiled):
    x = np.random.default_rng(2).random((10, 5, 3)).astype("float32")
    g = make_guide("nc", tiny_lstm, {})
    g.update(x[:4])
    before = g.covered
    g.update(x[4:])
    gain = g.new_items(4)
    assert gain.shape == (6,) and gain.sum() == g.covered - before
    curve = g.curve() * g.total
    np.testing.assert_allclose(gain, np.diff(curve)[3:])
