"""TD losses as pure functions over batched tensors (after rlax, batched on dim 0).

`discount_t` already contains gamma (and is 0 at terminations and life losses),
as in DQN Zoo. Each function returns per-example values; callers average.
"""

import torch
import torch.nn.functional as F


class _ClipGradient(torch.autograd.Function):
    # forward and setup_context apart: the form torch.func's transforms accept
    # (--compile differentiates with torch.func.grad, compiled.py).
    @staticmethod
    def forward(x, low, high):
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.bounds = inputs[1:]

    @staticmethod
    def backward(ctx, grad):
        low, high = ctx.bounds
        return grad.clamp(low, high), None, None


def clip_gradient(x, low, high):
    """Identity forward; clips the incoming gradient to [low, high] (rlax).

    With `l2_loss` averaged over a batch of 32 and bounds +-1/32 this is the error
    clipping of Mnih et al. 2015 (equal to a Huber loss with kappa 1).
    """
    return _ClipGradient.apply(x, low, high)


def l2_loss(x):
    """0.5 * x^2, element-wise (rlax.l2_loss)."""
    return 0.5 * x.square()


def huber_loss(x, delta=1.0):
    """0.5 x^2 for |x| <= delta, else delta * (|x| - 0.5 delta) (rlax.huber_loss)."""
    abs_x = x.abs()
    quadratic = abs_x.clamp(max=delta)
    return 0.5 * quadratic.square() + delta * (abs_x - quadratic)


def _action_values(q, a):
    return q.gather(1, a.long().unsqueeze(1)).squeeze(1)


def q_learning(q_tm1, a_tm1, r_t, discount_t, q_t):
    """TD error of Q-learning (Watkins 1989; Mnih et al. 2015).

    delta = r_t + discount_t * max_a q_t[a] - q_tm1[a_tm1]; the target carries no
    gradient. Shapes: q_* [B, A], a_tm1 [B], r_t and discount_t [B]. Returns [B].
    """
    target = r_t + discount_t * q_t.max(dim=1).values
    return target.detach() - _action_values(q_tm1, a_tm1)


def double_q_learning(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector):
    """TD error of double Q-learning (van Hasselt et al. 2016, arXiv:1509.06461).

    The greedy action at s_t comes from `q_t_selector` (online network) and is
    valued by `q_t_value` (target network). Returns [B].
    """
    best = q_t_selector.argmax(dim=1)
    target = r_t + discount_t * _action_values(q_t_value, best)
    return target.detach() - _action_values(q_tm1, a_tm1)


def _heads_into_batch(q):
    """[B, A, K] -> [B * K, A], row b * K + k holding head k of example b."""
    return q.transpose(1, 2).reshape(-1, q.shape[1])


def multi_head_q_learning(q_tm1, a_tm1, r_t, discount_t, q_t, q_t_selector=None):
    """TD errors of every head of a multi-head Q-network: Ensemble-DQN (Agarwal,
    Schuurmans & Norouzi 2020, arXiv:1907.04543, section 4.1), batch_rl's IDENTITY
    transform.

    Head k has its own target r_t + discount_t * max_a q_t[a, k] (with `q_t_selector`,
    the greedy action of each head comes from it: double Q per head). It is q_learning
    with the heads moved into the batch. Shapes: q_* [B, A, K], a_tm1, r_t and
    discount_t [B]. Returns [B, K].
    """
    size, heads = q_tm1.shape[0], q_tm1.shape[2]
    args = [_heads_into_batch(q_tm1), a_tm1.repeat_interleave(heads),
            r_t.repeat_interleave(heads), discount_t.repeat_interleave(heads),
            _heads_into_batch(q_t)]  # fmt: skip
    if q_t_selector is None:
        return q_learning(*args).view(size, heads)
    return double_q_learning(*args, _heads_into_batch(q_t_selector)).view(size, heads)


def rem_q_learning(q_tm1, a_tm1, r_t, discount_t, q_t, alpha, q_t_selector=None):
    """TD error of Random Ensemble Mixture (Agarwal, Schuurmans & Norouzi 2020,
    arXiv:1907.04543, section 4.2): Q-learning on the heads' convex combination
    Q_alpha = sum_k alpha_k Q_k, the same `alpha` [K] for the online and the target
    heads. The target is the max over actions of the mixture (not a mixture of each
    head's max): r_t + discount_t * max_a Q^t_alpha(a). With `q_t_selector`, the
    greedy action maximizes its mixture (double Q). Shapes: q_* [B, A, K], a_tm1, r_t
    and discount_t [B]. Returns [B].
    """

    def mixed(q):
        return (q * alpha).sum(-1)

    args = (mixed(q_tm1), a_tm1, r_t, discount_t, mixed(q_t))
    if q_t_selector is None:
        return q_learning(*args)
    return double_q_learning(*args, mixed(q_t_selector))


def cql_regularizer(q_tm1, a_tm1):
    """CQL(H)'s regularizer for discrete actions (Kumar, Zhou, Tucker & Levine 2020,
    arXiv:2006.04779): logsumexp_a q_tm1[a] - q_tm1[a_tm1], which pushes every
    action's value down (through a soft maximum) and the dataset's action's value up.
    Non-negative, and never 0 with two or more actions. Shapes: q_tm1 [B, A, ...]
    (extra dimensions, such as heads, are kept), a_tm1 [B]. Returns [B, ...].
    """
    return torch.logsumexp(q_tm1, dim=1) - q_tm1[torch.arange(len(a_tm1)), a_tm1.long()]


def categorical_l2_project(z_p, probs, z_q):
    """Projects distributions (atoms `z_p` [B, K'], probabilities `probs` [B, K'])
    onto the support `z_q` [K] under the Cramer (L2) distance (Bellemare et al. 2017,
    arXiv:1707.06887; Rowland et al. 2018). Atoms outside the support are clipped to
    its ends; equal neighbouring atoms in `z_q` do not divide by zero. Returns [B, K].

    Each atom's mass goes to its two neighbours in the support, in proportion to
    closeness (a triangular kernel). Evenly spaced supports (C51's) take a scatter
    path that costs O(B K') instead of O(B K K') on CPU.
    """
    if z_p.is_cuda or torch.compiler.is_compiling():
        # CUDA's scatter_add_ sums with atomics in no fixed order, so a resumed run
        # would drift in the last bits; the dense kernel is deterministic, needs no
        # host sync for the spacing check, and at 51 x 51 atoms costs nothing there.
        # A compiled update (--compile) takes it too: the check would break the graph.
        return _project_general(z_p, probs, z_q)
    gaps = z_q[1:] - z_q[:-1]
    if len(z_q) > 1 and bool((gaps > 0).all()) and bool(torch.allclose(gaps, gaps[0:1])):
        return _project_evenly_spaced(z_p, probs, z_q[0], z_q[-1], len(z_q))
    return _project_general(z_p, probs, z_q)


def _project_general(z_p, probs, z_q):
    gaps = z_q[1:] - z_q[:-1]
    vmin, vmax = z_q[0], z_q[-1]
    z_p = z_p.clamp(vmin, vmax).unsqueeze(1)  # [B, 1, K']
    # Distances to the next and previous support atoms, inverted (0 where equal).
    gap_up = torch.cat([gaps, z_q.new_zeros(1)])
    gap_down = torch.cat([z_q.new_zeros(1), gaps])
    inv_up = torch.where(gap_up > 0, 1.0 / gap_up.clamp(min=1e-12), torch.zeros_like(gap_up))
    inv_down = torch.where(
        gap_down > 0, 1.0 / gap_down.clamp(min=1e-12), torch.zeros_like(gap_down)
    )
    delta = z_p - z_q[None, :, None]  # [B, K, K']: z_p[j] - z_q[i]
    above = (delta >= 0).to(probs.dtype)
    scaled = above * delta * inv_up[None, :, None] - (1 - above) * delta * inv_down[None, :, None]
    return ((1 - scaled).clamp(0, 1) * probs.unsqueeze(1)).sum(-1)


def _project_evenly_spaced(z_p, probs, vmin, vmax, num_atoms):
    position = (z_p.clamp(vmin, vmax) - vmin) * ((num_atoms - 1) / (vmax - vmin))
    lower = position.floor().clamp(max=num_atoms - 1)
    upper_weight = position - lower  # 0 when an atom lands exactly on the support
    lower = lower.long()
    upper = (lower + 1).clamp(max=num_atoms - 1)
    out = probs.new_zeros(len(probs), num_atoms)
    out.scatter_add_(1, lower, probs * (1 - upper_weight))
    out.scatter_add_(1, upper, probs * upper_weight)
    return out


def _cross_entropy(target, logits):
    return -(target * torch.log_softmax(logits, dim=-1)).sum(-1)


def _categorical_target(r_t, discount_t, q_atoms_t, probs_t, a_t, q_atoms_tm1):
    target_z = r_t[:, None] + discount_t[:, None] * q_atoms_t[None, :]
    p_target = probs_t[torch.arange(len(a_t)), a_t]
    return categorical_l2_project(target_z, p_target, q_atoms_tm1).detach()


def categorical_q_learning(
    q_atoms_tm1, q_logits_tm1, a_tm1, r_t, discount_t, q_atoms_t, q_logits_t
):
    """C51's loss (Bellemare et al. 2017, arXiv:1707.06887): cross-entropy between the
    projected target distribution and the online logits of the taken action.

    The greedy action at s_t maximizes the mean of the target distribution itself.
    Shapes: atoms [K], logits [B, A, K], a_tm1/r_t/discount_t [B]. Returns [B].
    """
    probs_t = torch.softmax(q_logits_t, dim=-1)
    a_t = (probs_t * q_atoms_t).sum(-1).argmax(dim=1)
    target = _categorical_target(r_t, discount_t, q_atoms_t, probs_t, a_t, q_atoms_tm1)
    logits = q_logits_tm1[torch.arange(len(a_tm1)), a_tm1.long()]
    return _cross_entropy(target, logits)


def categorical_double_q_learning(
    q_atoms_tm1, q_logits_tm1, a_tm1, r_t, discount_t, q_atoms_t, q_logits_t, q_t_selector
):
    """Rainbow's loss (Hessel et al. 2018, arXiv:1710.02298): as C51, but the greedy
    action at s_t maximizes `q_t_selector` [B, A] (the online network). Returns [B]."""
    probs_t = torch.softmax(q_logits_t, dim=-1)
    a_t = q_t_selector.argmax(dim=1)
    target = _categorical_target(r_t, discount_t, q_atoms_t, probs_t, a_t, q_atoms_tm1)
    logits = q_logits_tm1[torch.arange(len(a_tm1)), a_tm1.long()]
    return _cross_entropy(target, logits)


def quantile_regression_loss(dist_src, tau_src, dist_target, huber_param=0.0):
    """Quantile (Huber) regression loss (Dabney et al. 2018, arXiv:1710.10044).

    sum_i mean_j |tau_i - 1{delta_ij < 0}| * L(delta_ij), delta_ij = target_j - src_i,
    L = Huber(kappa) if huber_param > 0 else |.|, no division by kappa (rlax). This is
    also batch_rl's QR-DQN reduction (mean over target j, sum over online i). The
    indicator and the target carry no gradient. Shapes: dist_src and tau_src [B, N],
    dist_target [B, N']. Returns [B].
    """
    src = dist_src[:, :, None].expand(-1, -1, dist_target.shape[-1])  # [B, N, N']
    target = dist_target.detach()[:, None, :].expand_as(src)
    tau = tau_src.detach()[:, :, None]
    # |tau - 1{delta < 0}| is 1 - tau where target < src, else tau (tau in [0, 1]).
    weight = torch.where(target < src.detach(), 1 - tau, tau)
    # PyTorch's fused huber/l1 kernels give rlax's values (0.5 d^2 inside kappa,
    # kappa (|d| - kappa / 2) outside) at a third of the elementwise passes.
    if huber_param > 0:
        loss = F.huber_loss(src, target, reduction="none", delta=huber_param)
    else:
        loss = F.l1_loss(src, target, reduction="none")
    return (weight * loss).mean(-1).sum(-1)


def _action_column(dist, a):
    """dist[b, :, a[b]] for dist [B, N, A] and a [B]: a gather (with the same values and
    gradients as that indexing), which compiles (--compile) where indexing with an
    argmax computed in the same graph crashed PyTorch 2.13's CPU code."""
    index = a.long()[:, None, None].expand(-1, dist.shape[1], 1)
    return dist.gather(2, index).squeeze(2)


def quantile_q_learning(
    dist_q_tm1, tau_q_tm1, a_tm1, r_t, discount_t, dist_q_t_selector, dist_q_t,
    huber_param=0.0,
):  # fmt: skip
    """QR-DQN's and IQN's loss (Dabney et al. 2018, arXiv:1710.10044 and 1806.06923).

    The greedy action at s_t maximizes the mean over quantiles of
    `dist_q_t_selector`. Shapes: dist_q_tm1 [B, N, A], tau_q_tm1 [B, N],
    dist_q_t_selector and dist_q_t [B, N', A]. Returns [B].
    """
    dist_qa_tm1 = _action_column(dist_q_tm1, a_tm1)
    a_t = dist_q_t_selector.mean(dim=1).argmax(dim=1)
    dist_qa_t = _action_column(dist_q_t, a_t)
    dist_target = r_t[:, None] + discount_t[:, None] * dist_qa_t
    return quantile_regression_loss(dist_qa_tm1, tau_q_tm1, dist_target, huber_param)


# ---- R2D1 (Kapturowski et al. 2019): value rescaling and the sequence loss ----------


def signed_hyperbolic(x, eps=1e-3):
    """Value rescaling h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Pohlen et al. 2018,
    arXiv:1805.11593; R2D2/R2D1, rlpyt's `value_scale`; rlax.signed_hyperbolic).
    Shrinks large returns roughly to their square root, so one network fits games whose
    scores differ by orders of magnitude without clipping rewards. h(0) = 0, odd,
    strictly increasing, and invertible (`signed_parabolic`)."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1) - 1) + eps * x


def signed_parabolic(x, eps=1e-3):
    """h^-1(z) = sign(z) (((sqrt(1 + 4 eps (|z| + 1 + eps)) - 1) / (2 eps))^2 - 1), the
    inverse of `signed_hyperbolic` (Pohlen et al. 2018, proposition A.2; rlpyt's
    `inv_value_scale`; rlax.signed_parabolic)."""
    z = (torch.sqrt(1 + 4 * eps * (x.abs() + 1 + eps)) - 1) / (2 * eps)
    return torch.sign(x) * (z.square() - 1)


def transformed_n_step_q_learning(q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector=None,
                                  eps=1e-3):  # fmt: skip
    """TD errors of R2D1's rescaled n-step (double) Q-learning (Kapturowski et al. 2019,
    "Recurrent Experience Replay in Distributed RL", ICLR; rlpyt's R2D1.loss, B3.3 step 7):

        y = h(r_t + discount_t * h^-1(q_t_value[a*])),   delta = y - q_tm1[a_tm1]

    with a* = argmax q_t_selector (double Q: the online network), or argmax q_t_value.
    `r_t` is the n-step return and `discount_t` holds gamma^k (0 after a termination), as
    everywhere in qzoo. Any leading dims (here [T, B]): q_* [..., A], the rest [...].
    The target carries no gradient. Returns delta [...]."""
    selector = q_t_value if q_t_selector is None else q_t_selector
    best = selector.argmax(dim=-1, keepdim=True)
    bootstrap = q_t_value.gather(-1, best).squeeze(-1)
    target = signed_hyperbolic(r_t + discount_t * signed_parabolic(bootstrap, eps), eps)
    q_taken = q_tm1.gather(-1, a_tm1.long().unsqueeze(-1)).squeeze(-1)
    return target.detach() - q_taken


def valid_until_episode_end(transition_exists, dim=0):
    """rlpyt's `valid_from_done` in qzoo's terms (B3.3 step 8): 1 for the steps of a
    sequence up to its first step that starts no transition (an episode's LAST row, or a
    row whose episode was abandoned), 0 from there on, since the unrolled state no longer
    belongs to the episode after it. `transition_exists` [..., T, ...] bool along `dim`."""
    return torch.cumprod(transition_exists.to(torch.float32), dim=dim)


def sequence_priorities(abs_td, valid, eta=0.9, dim=0):
    """R2D2's sequence priority (Kapturowski et al. 2019, eq. in sec. 2.3; rlpyt's
    `pri_eta`): eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t| over the valid steps
    along `dim` (0 for a sequence with none)."""
    abs_td = abs_td * valid
    mean = abs_td.sum(dim) / valid.sum(dim).clamp(min=1)
    return eta * abs_td.amax(dim) + (1 - eta) * mean


def lambda_returns(r_t, discount_t, v_t, lambda_t):
    """Lambda-returns over a time axis (dim 0), computed backwards (rlax.lambda_returns;
    Peng & Williams 1996's Q(lambda) with v_t = max_a Q(s_t, a): PQN, Gallici et al.
    2025, "Simplifying Deep Temporal Difference Learning", ICLR, eq. 5):

      G_t = r_t + discount_t ((1 - lambda_t) v_t + lambda_t G_{t+1}),  G_{T-1}'s G_T = v_{T-1}

    r_t, discount_t, v_t [T, ...]: the reward, the discount (0 at a termination) and the
    value of the state each step t reaches; lambda_t a number or [T, ...] (0 where the
    trace must not carry on: the state reached ends an episode by truncation, its value
    the bootstrap). Returns [T, ...], without gradient."""
    v_t = v_t.detach()
    lambda_t = torch.as_tensor(lambda_t, dtype=v_t.dtype, device=v_t.device).expand_as(v_t)
    returns = torch.empty_like(v_t)
    g = v_t[-1]
    for t in range(v_t.shape[0] - 1, -1, -1):
        g = r_t[t] + discount_t[t] * ((1 - lambda_t[t]) * v_t[t] + lambda_t[t] * g)
        returns[t] = g
    return returns
