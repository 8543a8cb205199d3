"""Quality metrics: distances, FID, IS, text edits and the Table 5 selection rule."""
import numpy as np
import pytest
from scipy import linalg

from rnncon_core import quality
from rnncon_core.errors import InputError


@pytest.fixture(scope="module")
def mnist():
    from rnncon_core.data import load_dataset
    return load_dataset("mnist")


@pytest.fixture(scope="module")
def feature_net(mnist):
    """The feature CNN's architecture, trained one epoch on 2,000 digits (a few seconds)."""
    from rnncon_core.zoo import build_model
    net = build_model("mnist-features", seed=0)
    net.fit(mnist.x_train[:2000], mnist.y_train[:2000], epochs=1, batch_size=64, verbose=0)
    return net


def test_l1_l2_per_input_and_set():
    rng = np.random.default_rng(0)
    a, b = rng.random((5, 4, 3)), rng.random((5, 4, 3))
    per = quality.l1(a, b)
    assert per.shape == (5,)
    for i in range(5):
        assert per[i] == pytest.approx(sum(abs(float(u) - float(v))
                                           for u, v in zip(a[i].ravel(), b[i].ravel())))
        assert quality.l2(a, b)[i] == pytest.approx(np.linalg.norm(a[i] - b[i]))
    assert quality.l1(a, b, "mean") == pytest.approx(per.mean())
    assert quality.l1(a, b, "sum") == pytest.approx(per.sum())
    with pytest.raises(InputError, match="shape"):
        quality.l1(a, b[:4])
    with pytest.raises(InputError, match="reduction"):
        quality.l2(a, b, "median")


def test_fid_from_features_matches_sqrtm_oracle():
    rng = np.random.default_rng(1)
    fa = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 6))
    fb = rng.normal(loc=0.5, size=(200, 6)) @ rng.normal(size=(6, 6))
    mu_a, mu_b = fa.mean(0), fb.mean(0)
    sa, sb = np.cov(fa, rowvar=False), np.cov(fb, rowvar=False)
    oracle = ((mu_a - mu_b) ** 2).sum() + np.trace(sa + sb - 2 * linalg.sqrtm(sa @ sb).real)
    assert quality.fid_from_features(fa, fb) == pytest.approx(oracle, rel=1e-6)
    # one dimension: (m_a - m_b)^2 + (s_a - s_b)^2
    x, y = rng.normal(2, 3, size=(1000, 1)), rng.normal(-1, 0.5, size=(800, 1))
    closed = (x.mean() - y.mean()) ** 2 + (x.std(ddof=1) - y.std(ddof=1)) ** 2
    assert quality.fid_from_features(x, y) == pytest.approx(closed, rel=1e-9)
    # singular covariances (fewer inputs than dimensions) stay finite and >= 0
    assert 0 <= quality.fid_from_features(rng.random((5, 40)), rng.random((7, 40))) < np.inf
    with pytest.raises(InputError, match="at least two"):
        quality.fid_from_features(fa[:1], fb)


def test_fid_identity_halves_and_noise(mnist, feature_net):
    x = mnist.x_test[:1000]
    assert quality.fid(x, x, feature_net) == pytest.approx(0.0, abs=1e-6)
    halves = quality.fid(x[:500], x[500:], feature_net)
    noise = np.random.default_rng(0).random((500, 28, 28)).astype(np.float32)
    against_noise = quality.fid(x[:500], noise, feature_net)
    assert halves < 0.1 * against_noise, (halves, against_noise)


def test_inception_score(mnist, feature_net):
    real = quality.inception_score(mnist.x_test[:1000], feature_net)
    constant = quality.inception_score(np.full((1000, 28, 28), 0.5, np.float32), feature_net)
    assert constant == pytest.approx(1.0, abs=1e-6)     # one distribution for every input
    assert real > 3.0 > constant
    # oracle: uniform-over-classes, fully confident predictions give exactly C
    probs = np.eye(10)[np.arange(100) % 10]
    assert quality.inception_score_from_probs(probs) == pytest.approx(10.0, rel=1e-6)
    mean, std = quality.inception_score_from_probs(probs, splits=10, return_std=True)
    assert mean == pytest.approx(10.0, rel=1e-6) and std == pytest.approx(0.0, abs=1e-6)


def test_feature_inputs_checked(feature_net):
    with pytest.raises(InputError, match="shaped"):
        quality.fid(np.zeros((4, 8, 8)), np.zeros((4, 8, 8)), feature_net)
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        quality.inception_score(np.full((4, 28, 28), 255.0), feature_net)
    with pytest.raises(InputError, match="NaN"):
        quality.inception_score(np.full((4, 28, 28), np.nan), feature_net)


def test_set_quality_names_the_feature_net(mnist, feature_net):
    seeds = mnist.x_test[:50]
    gen = np.clip(seeds + 0.1, 0, 1)
    q = quality.set_quality(gen, seeds, mnist.x_test[50:300], feature_net)
    assert q["l1_mean"] == pytest.approx(quality.l1(gen, seeds).mean())
    assert q["fid"] > 0 and 1 <= q["is"] <= 10
    assert "not with the paper" in q["note"]


def test_text_quality_reads_the_one_words_changed():
    seed = "this film is very good".split()
    t = quality.text_quality([seed, seed], [seed, "this movie is good".split()])
    assert t == {"n": 2, "words_changed_mean": pytest.approx(1.0),    # (0 + 2) / 2
                 "share_changed_mean": pytest.approx(0.2)}             # (0 + 2/5) / 2
    # id arrays: padding and the start mark are not words
    t = quality.text_quality([np.array([0, 0, 1, 5, 6, 7])], [np.array([0, 1, 5, 9, 7])])
    assert t["words_changed_mean"] == 1.0 and t["share_changed_mean"] == pytest.approx(1 / 3)
    with pytest.raises(InputError, match="one generated text per seed"):
        quality.text_quality([seed], [])


def test_selection_rule_on_hand_made_candidates():
    pick = quality.select_retraining_set
    # distinct L1: the smallest wins, whatever FID and IS say
    c = [{"run_id": "a", "l1": 30.0, "fid": 1.0, "is": 9.0},
         {"run_id": "b", "l1": 10.0, "fid": 50.0, "is": 1.5},
         {"run_id": "c", "l1": 20.0, "fid": 2.0, "is": 8.0}]
    assert pick(c)["run_id"] == "b" and pick(c)["selected_by"] == "l1"
    # L1 tied (within 5 %): the smallest FID among the tied; "c" has a smaller FID but a
    # clearly larger L1, so it is out of the race
    c = [{"run_id": "a", "l1": 10.2, "fid": 40.0, "is": 9.0},
         {"run_id": "b", "l1": 10.0, "fid": 30.0, "is": 2.0},
         {"run_id": "c", "l1": 15.0, "fid": 5.0, "is": 9.5}]
    assert pick(c)["run_id"] == "b" and pick(c)["selected_by"] == "fid"
    # L1 and FID tied: the largest IS
    c = [{"run_id": "a", "l1": 10.1, "fid": 30.5, "is": 2.0},
         {"run_id": "b", "l1": 10.0, "fid": 30.0, "is": 1.5},
         {"run_id": "c", "l1": 10.2, "fid": 30.2, "is": 3.0}]
    r = pick(c)
    assert r["run_id"] == "c" and r["selected_by"] == "is" and r["tied_fid"] == [0, 1, 2]
    # strict order (no tolerance): plain smallest L1
    assert pick(c, l1_tol=0, fid_tol=0)["run_id"] == "b"
    with pytest.raises(InputError, match="no candidate"):
        pick([])
    with pytest.raises(InputError, match="fid"):
        pick([{"l1": 1.0, "is": 2.0}])


def _ssim_brute(a, b, sigma=1.5, truncate=3.5):
    """SSIM by explicit windows (Wang et al. 2004): an 11 x 11 Gaussian window at every pixel
    whose window lies inside the image, population statistics, one pixel at a time."""
    r = int(truncate * sigma + 0.5)
    g = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    w = np.outer(g, g) / g.sum() ** 2
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    vals = []
    for i in range(r, a.shape[0] - r):
        for j in range(r, a.shape[1] - r):
            wa, wb = a[i - r:i + r + 1, j - r:j + r + 1], b[i - r:i + r + 1, j - r:j + r + 1]
            ma, mb = (w * wa).sum(), (w * wb).sum()
            va, vb = (w * wa * wa).sum() - ma ** 2, (w * wb * wb).sum() - mb ** 2
            cv = (w * wa * wb).sum() - ma * mb
            vals.append((2 * ma * mb + c1) * (2 * cv + c2) /
                        ((ma ** 2 + mb ** 2 + c1) * (va + vb + c2)))
    return float(np.mean(vals))


def test_ssim_known_values_brute_force_and_search():
    from rnncon_core.experiments.pollution import nearest_by_ssim, ssim, ssim_matrix
    # two flat images: only the luminance term is left, (2 m_a m_b + C1) / (m_a^2 + m_b^2 + C1)
    flat = np.full((1, 14, 14), 0.2), np.full((1, 14, 14), 0.4)
    assert ssim(*flat)[0] == pytest.approx((2 * 0.08 + 1e-4) / (0.2 + 1e-4), abs=1e-12)
    assert ssim(flat[0][0] * 255, flat[1][0] * 255, data_range=255)[0] == \
        pytest.approx(0.80009995, abs=1e-8)
    rng = np.random.default_rng(4)
    a, b = rng.random((3, 14, 14)), rng.random((3, 14, 14))
    b[0] = np.clip(a[0] + rng.normal(0, 0.05, a[0].shape), 0, 1)
    ours = ssim(a, b)
    for i in range(3):
        assert ours[i] == pytest.approx(_ssim_brute(a[i], b[i]), abs=1e-10)
    # the stacked pairs give scikit-image's value of each pair alone, across chunk borders too
    from skimage.metrics import structural_similarity
    from rnncon_core.experiments.pollution import _ssim_pairs
    one_by_one = [structural_similarity(x, y, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                        use_sample_covariance=False) for x, y in zip(a, b)]
    assert ours == pytest.approx(one_by_one, abs=1e-12)
    assert _ssim_pairs(a, b, 1.0, chunk=2) == pytest.approx(one_by_one, abs=1e-12)
    assert ssim(a, a) == pytest.approx(np.ones(3))
    assert ssim(a, 1 - a) == pytest.approx(ssim(1 - a, a))      # symmetric
    assert ours[0] > ours[1] and ours[0] > ours[2]       # the noisy copy is the most similar
    m = ssim_matrix(a, b)
    assert m.shape == (3, 3) and m[1, 2] == pytest.approx(ssim(a[1], b[2])[0])
    # each query finds its own lightly perturbed copy in a shuffled pool
    pool = rng.random((20, 14, 14))
    pool[[5, 11, 17]] = np.clip(a + rng.normal(0, 0.03, a.shape), 0, 1)
    assert nearest_by_ssim(a, pool, k=1).ravel().tolist() == [5, 11, 17]
    with pytest.raises(InputError, match="shape"):
        ssim(a, b[:, :12])
    with pytest.raises(InputError, match="at least 11 x 11"):
        ssim(a[:, :10, :10], b[:, :10, :10])


def test_tsne_embedding_for_the_report_and_the_dashboard():
    from sklearn.manifold import TSNE
    rng = np.random.default_rng(0)
    # two far-apart clusters of 15 "perturbations" (5 x 2 images) each
    pts = np.concatenate([rng.normal(0, 0.1, (15, 5, 2)), rng.normal(5, 0.1, (15, 5, 2))])
    emb = quality.tsne_embedding(pts, seed=3, max_iter=250)
    assert emb.shape == (30, 2)
    # the same seed, the same map: the perplexity is capped at (N - 1) / 3 = 9.67; otherwise scikit-learn's t-SNE, PCA init
    ref = TSNE(n_components=2, perplexity=29 / 3, init="pca", random_state=3, max_iter=250) \
        .fit_transform(pts.reshape(30, -1).astype(np.float32))
    np.testing.assert_allclose(emb, ref, rtol=1e-5, atol=1e-5)
    # the clusters stay apart: every point lies nearer its own cluster's centre than the other's
    # (the map's scale and spread vary with the CPU's float rounding; the separation does not)
    centres = np.stack([emb[:15].mean(0), emb[15:].mean(0)])
    nearest = np.linalg.norm(emb[:, None] - centres[None], axis=2).argmin(1)
    assert nearest.tolist() == [0] * 15 + [1] * 15
    assert quality.tsne_embedding(pts[:3], max_iter=250).shape == (3, 2)    # tiny sets work
    with pytest.raises(InputError, match="at least 3 points"):
        quality.tsne_embedding(pts[:2])
