"""Per-environment epsilons: rlpyt's log-spaced vector and Ape-X's per-actor rule."""

import numpy as np

from qzoo.acting.exploration import apex_epsilons, log_spaced_epsilons


def test_log_spaced_epsilons_rlpyt_r2d1_example():
    # rlpyt's R2D1 config: eps_final_min 0.0005, eps_final 0.1, 4 envs.
    eps = log_spaced_epsilons(0.0005, 0.1, 4)
    np.testing.assert_allclose(eps, [0.0005, 0.0029240, 0.0171000, 0.1], rtol=1e-4)
    # By hand: ratio 200 ** (1/3) = 5.848; 0.0005 * 5.848 = 0.002924.
    assert abs(eps[1] / eps[0] - 200 ** (1 / 3)) < 1e-9


def test_log_spaced_epsilons_edges():
    # torch.logspace with one step gives the start: the single env gets eps_final_min.
    assert log_spaced_epsilons(0.0005, 0.1, 1).tolist() == [0.0005]
    eps = log_spaced_epsilons(0.0005, 0.1, 32)
    assert eps[0] == 0.0005 and abs(eps[-1] - 0.1) < 1e-12
    assert np.all(np.diff(np.log(eps)) > 0)
    np.testing.assert_allclose(np.diff(np.log10(eps)), np.log10(200) / 31)


def test_apex_epsilons():
    eps = apex_epsilons(8)
    assert eps[0] == 0.4
    np.testing.assert_allclose(eps[-1], 0.4**8)  # 0.00065536
    np.testing.assert_allclose(eps[1], 0.4**2)  # 1 + 7 * 1 / 7 = 2
    assert apex_epsilons(1).tolist() == [0.4]
