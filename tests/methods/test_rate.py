"""RATE: the T-Maze generator (clue only at t = 0, flag at the junction, reward only for the clue's arm, oracle
trajectories succeed), the segment recurrence (the memory carries the clue; the valve matters), the step-by-step
rollout against the batched forward and the fast test outcomes against the rollout, the far corridors (fewer
episodes, no DT), MiniGrid-Memory's oracle, bad input (ConfigError and exit 2), the ci run, the
claims on synthetic Datasets and the dashboard's live functions."""

import numpy as np
import pytest
import torch
import xarray as xr
from click.testing import CliRunner

from lab.config import ConfigError
from lab.methods.rate import env as E
from lab.methods.rate import model as M
from lab.methods.rate.config import VARIANTS, Config
from tests.conftest import assert_trained_here_as_pooled


# --- the T-Maze -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [2, 3, 17])
def test_tmaze_shows_the_clue_once_flags_the_junction_and_rewards_only_the_clues_arm(length):
    for clue in (-1, 1):
        for turn, reward in ((E.UP, float(clue == 1)), (E.DOWN, float(clue == -1))):
            env = E.TMaze(length, seed=3)
            obs, info = env.reset(clue=clue)
            assert info["clue"] == clue and obs[1] == clue and obs[0] == 0
            seen = [obs]
            for _ in range(length - 1):
                obs, r, term, trunc, _ = env.step(E.RIGHT)
                assert r == 0 and not term and not trunc
                seen.append(obs)
            seen = np.stack(seen)
            assert np.all(seen[1:, 1] == 0)  # the clue only at t = 0
            assert np.all(seen[:, 2] == (np.arange(length) == length - 1))  # the flag only at the junction
            assert set(np.unique(seen[:, 3])) <= {-1, 0, 1}
            obs, r, term, trunc, _ = env.step(turn)
            assert term and r == reward and obs[0] == (1 if turn == E.UP else -1)


def test_tmaze_walls_a_turn_in_the_corridor_and_times_out():
    env = E.TMaze(4, seed=0)
    env.reset(clue=1)
    _, r, term, _, info = env.step(E.UP)  # a wall: the agent stays in the corridor
    assert not term and r == 0 and info["y"] == 0 and info["x"] == 0
    env.step(E.RIGHT)
    env.step(E.RIGHT)
    _, r, term, trunc, _ = env.step(E.RIGHT)  # never turned: time is up at L steps
    assert trunc and not term and r == 0


def test_oracle_trajectories_are_successful_episodes():
    rng = np.random.default_rng(0)
    data = E.oracle(7, 40, rng, turn_weight=5.0)
    assert data.obs.shape == (40, 7, 4) and data.actions.shape == (40, 7)
    assert set(data.clues.tolist()) == {-1, 1}
    torch.testing.assert_close(data.obs[:, 0, 1], data.clues.float())
    assert torch.all(data.obs[:, 1:, 1] == 0) and torch.all(data.obs[:, -1, 2] == 1)
    assert torch.all(data.weights[:, -1] == 5.0) and torch.all(data.weights[:, :-1] == 1.0)
    for i in range(5):  # replayed in the maze, every oracle episode earns the reward
        env = E.TMaze(7)
        env.reset(clue=int(data.clues[i]))
        for a in data.actions[i].tolist():
            _, r, term, _, _ = env.step(a)
        assert term and r == 1.0


# --- the models -----------------------------------------------------------------------------------------------------
def _rate(valve=True, seed=0):
    torch.manual_seed(seed)
    return M.RATE(E.OBS_DIM, E.N_ACTIONS, 16, 2, 2, segment=3, n_memory=2, valve=valve).eval()


def test_memory_carries_the_clue_and_the_valve_changes_it():
    data = E.oracle(9, 2, np.random.default_rng(1))
    flipped = E.Trajectories(data.rtg.clone(), data.obs.clone(), data.actions.clone(), data.weights, data.clues)
    flipped.obs[:, 0, 1] *= -1  # the other clue, everything else the same
    model = _rate()
    with torch.no_grad():
        mem_a, mem_b = [], []
        model(data.rtg, data.obs, data.actions, memories=mem_a)
        model(flipped.rtg, flipped.obs, flipped.actions, memories=mem_b)
    assert len(mem_a) == 3  # M_0, M_1, M_2 for 9 steps in segments of 3
    torch.testing.assert_close(mem_a[0], mem_b[0])
    assert not torch.allclose(mem_a[1], mem_b[1])  # after segment 1 the memory knows the clue
    assert not torch.allclose(mem_a[2], mem_b[2])  # and still does after segment 2 (no clue in it)
    plain = _rate(valve=False)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("valve.")})
    with torch.no_grad():
        mem_c = []
        out_c = plain(data.rtg, data.obs, data.actions, memories=mem_c)
        out_a = model(data.rtg, data.obs, data.actions)
    torch.testing.assert_close(mem_c[0], mem_a[0])  # same weights, same M_0
    assert not torch.allclose(mem_c[1], mem_a[1])  # the valve makes M_1
    torch.testing.assert_close(out_c[:, :3], out_a[:, :3])  # the first segment does not depend on it
    assert not torch.allclose(out_c[:, 3:], out_a[:, 3:])


def test_official_valve_reads_relu_of_the_written_memory_with_no_residual():
    torch.manual_seed(0)
    valve = M.OfficialValve(16, 2)
    old_a, old_b, new = torch.randn(3, 2, 4, 16).unbind(0)
    with torch.no_grad():
        assert not torch.allclose(valve(old_a, new)[0], valve(old_b, new)[0])  # M_n is the query: it matters
        torch.testing.assert_close(valve(old_a, new)[0], valve(old_a, new.clamp(min=0))[0])  # K = V = ReLU(M~)
        # by hand: softmax(q k^T / sqrt(e)) v per head, then the output projection
        q, k, v = valve.q(old_a), valve.k(new.relu()), valve.v(new.relu())
        heads = []
        for h in range(2):
            sl = slice(8 * h, 8 * h + 8)
            heads.append(torch.softmax(q[..., sl] @ k[..., sl].transpose(-1, -2) / 8 ** 0.5, -1) @ v[..., sl])
        torch.testing.assert_close(valve(old_a, new)[0], valve.out(torch.cat(heads, -1)))
        valve.out.weight.zero_()  # nothing read from M~: M_{n+1} is the output bias, whatever M_n holds
        torch.testing.assert_close(valve(old_a, new)[0], valve(old_b, new)[0])


@pytest.mark.parametrize("form", M.VALVES)
def test_detached_memory_leaves_the_valve_without_gradient(form):
    data = E.oracle(9, 4, np.random.default_rng(2))
    grads = {}
    for detach in (True, False):
        torch.manual_seed(0)
        model = M.RATE(E.OBS_DIM, E.N_ACTIONS, 16, 2, 2, segment=3, n_memory=2, valve_form=form, detach=detach)
        M.weighted_loss(model(data.rtg, data.obs, data.actions), data.actions, data.weights).backward()
        grads[detach] = {n: p.grad for n, p in model.named_parameters()}
    # detached (the official trainer): a segment's written memory reaches a loss only through the next segment,
    # so the valve learns nothing; the read side and M_0 (read by the first segment) still learn
    assert all(g is None for n, g in grads[True].items() if n.startswith("valve."))
    assert grads[True]["memory0"] is not None and grads[True]["memory0"].abs().sum() > 0
    assert all(g is not None and g.abs().sum() > 0 for n, g in grads[False].items() if n.startswith("valve.")
               and n.endswith("weight"))


def test_paper_valve_has_no_residual_path_from_the_old_memory():
    torch.manual_seed(0)
    valve = M.MemoryValve(16, 2)
    old_a, old_b, new = torch.randn(3, 2, 4, 16).unbind(0)
    with torch.no_grad():
        assert not torch.allclose(valve(old_a, new)[0], valve(old_b, new)[0])  # M_n is the query: it matters
        valve.out.weight.zero_()  # the attention's output zeroed: nothing read from M~_{n+1}
        valve.out.bias.zero_()
        from_a, from_b = valve(old_a, new)[0], valve(old_b, new)[0]
        torch.testing.assert_close(from_a, from_b)  # M_{n+1} no longer depends on M_n
        torch.testing.assert_close(from_a, valve.ffn(valve.norm_ff(torch.zeros(2, 4, 16))))  # it is FFN(norm 0)
        assert not torch.allclose(from_a + old_a, from_b + old_b)  # (a residual from M_n would carry it through)


class _Replay:
    """Feeds a fixed action sequence to the maze while recording the agent's logits (teacher forcing)."""

    def __init__(self, agent, actions):
        self.agent, self.actions, self.logits, self.obs, self.t = agent, actions, [], [], 0

    def start(self, n, record=False):
        self.t = 0
        return self.agent.start(n, record=record)

    def act(self, state, rtg, obs):
        self.logits.append(self.agent.act(state, rtg, obs))
        out = torch.full_like(self.logits[-1], -1e9)
        out[torch.arange(len(out)), self.actions[:, self.t]] = 0
        self.obs.append(obs)
        return out

    def observe(self, state, action):
        self.agent.observe(state, action)
        self.t += 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_step_by_step_rollout_equals_the_batched_forward(variant):
    from lab.methods.rate.train import build

    cfg = Config.from_profile("ci", segment_length=3, n_segments=2, eval_lengths=(3, 6, 60), d_model=16)
    torch.manual_seed(0)
    agent = build(cfg, variant, context=11).eval()
    length = 11
    rng = np.random.default_rng(0)
    clues = np.array([1, -1, 1])
    actions = torch.from_numpy(np.where(clues[:, None] > 0, E.UP, E.DOWN) * (np.arange(length) == length - 1))
    replay = _Replay(agent, actions)
    out = E.rollout(replay, length, clues, rng)
    assert out["success"].all()  # the oracle's actions, replayed through the maze
    obs = torch.stack(replay.obs, 1)  # (3, T, 4): what the agent saw
    step_logits = torch.stack(replay.logits, 1)
    with torch.no_grad():
        if variant == "dt_short":  # the step form reads the last K steps: compare on the last window
            batched = agent(torch.ones(3, 3), obs[:, -3:], actions[:, -3:])[:, -1]
            torch.testing.assert_close(step_logits[:, -1], batched, atol=1e-5, rtol=1e-4)
        else:
            batched = agent(torch.ones(3, length), obs, actions)
            torch.testing.assert_close(step_logits, batched, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bias", [0.0, 2.5])
def test_fast_outcomes_equal_the_step_by_step_rollout(variant, bias):
    from lab.methods.rate.train import build

    cfg = Config.from_profile("ci", segment_length=3, n_segments=2, eval_lengths=(3, 6, 60), d_model=16)
    torch.manual_seed(1)
    agent = build(cfg, variant, context=8).eval()
    with torch.no_grad():  # a push towards "right": most episodes walk to the junction, some leave the path
        agent.head.bias[E.RIGHT] += bias
    walked = 0
    for length in (2, 7, 25):
        clues = np.resize(np.array([1, -1]), 24)
        fast = E.outcomes(agent, length, clues, np.random.default_rng([length, 5]))
        step = E.rollout(agent, length, clues, np.random.default_rng([length, 5]))
        np.testing.assert_array_equal(fast["success"], step["success"])
        np.testing.assert_array_equal(fast["turned"], step["positions"][:, -1, 1] != 0)
        walked += int((step["positions"][:, -1, 0] == length - 1).sum())
    if bias:
        assert walked > 0  # the batched path decided some episodes


def test_far_corridors_test_fewer_episodes_and_no_dt():
    from lab.methods.rate.train import scores, trained

    cfg = Config.from_profile("ci", eval_lengths=(4, 8, 80, 200), n_eval=6, n_eval_far=4)
    assert [cfg.episodes("rate", L) for L in cfg.eval_lengths] == [6, 6, 6, 4]
    assert cfg.episodes("gru", 200) == 4 and cfg.episodes("dt_long", 200) == 0 == cfg.episodes("dt_short", 200)
    assert cfg.episodes("dt_long", 80) == 6  # 10 x T_train: still tested
    out = scores(cfg, "dt_short", 0, trained(cfg, "dt_short", 0))
    assert np.isfinite(out["success"][:3]).all() and np.isnan(out["success"][3]) and np.isnan(out["turned"][3])
    assert np.isfinite(scores(cfg, "gru", 0, trained(cfg, "gru", 0))["success"]).all()


def test_rollout_records_the_valve_at_every_segment_boundary():
    model = _rate()
    out = E.rollout(model, 10, np.array([1, -1]), np.random.default_rng(0), record=True)
    assert len(out["record"]) == 3  # boundaries after steps 3, 6, 9
    w = out["record"][0]["weights"]
    assert w.shape == (2, 2, 2)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2))
    assert out["positions"].shape == (2, 11, 2) and out["actions"].shape == (2, 10)


def test_minigrid_oracle_reaches_the_matching_object():
    from lab.methods.rate import minigrid as G

    cfg = Config.from_profile("ci", minigrid_episodes=12)
    data = G.oracle_data(cfg, 0)  # raises if any oracle episode fails
    assert sum(len(t) for t in data.values()) == 12
    assert {int(c) for t in data.values() for c in t.clues} == {-1, 1}
    for T, t in data.items():
        assert t.obs.shape[1:] == (T, G.OBS_DIM) and torch.all(t.weights[:, -2:] == cfg.turn_weight)


# --- bad input ------------------------------------------------------------------------------------------------------
def test_bad_input_names_the_field_the_value_and_what_is_allowed():
    with pytest.raises(ConfigError, match=r"envs=\('tmaze', 'atari'\) is not allowed; allowed: each value one of "
                                          r"'tmaze', 'minigrid'"):
        Config(envs=("tmaze", "atari"))
    with pytest.raises(ConfigError, match=r"eval_lengths=\(1, 10, 30, 300\) is not allowed"):
        Config(eval_lengths=(1, 10, 30, 300))
    with pytest.raises(ConfigError, match=r"n_segments=1 is not allowed; allowed: at least 2"):
        Config(n_segments=1, eval_lengths=(10, 100))
    with pytest.raises(ConfigError, match=r"eval_lengths=\(10, 30, 90\) is not allowed; allowed: a longest corridor "
                                          r"of at least 10 x K x N = 300"):
        Config(eval_lengths=(10, 30, 90))
    with pytest.raises(ConfigError, match="corridor_length=1 is not allowed; allowed: an integer >= 2"):
        E.TMaze(1)
    with pytest.raises(ConfigError, match="corridor_length=1 is not allowed"):
        E.oracle(1, 2, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="env='atari' is not allowed"):
        from lab.methods.rate import live

        live.rollout("ci", "rate", 10, 0, env="atari")
    with pytest.raises(ConfigError, match="corridor_length=1 is not allowed"):
        from lab.methods.rate import live

        live.rollout("ci", "rate", 1, 0)


@pytest.mark.parametrize(("args", "fragment"), [
    (["-p", "envs=tmaze,atari"], "envs=('tmaze', 'atari') is not allowed; allowed: each value one of"),
    (["-p", "eval_lengths=1,10,30,300"], "eval_lengths=(1, 10, 30, 300) is not allowed"),
    (["-p", "segment_length=40"], "allowed: lengths that include segment_length=40"),
    (["-p", "n_segments=1", "-p", "eval_lengths=10,100"], "n_segments=1 is not allowed; allowed: at least 2: the "
                                                          "training episode must be longer than the short DT's"),
])
def test_cli_exits_2_on_bad_input(tmp_path, monkeypatch, args, fragment):
    from lab.cli import cli

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["run", "rate", "-P", "ci", *args])
    assert out.exit_code == 2, out.output
    assert fragment in " ".join(out.output.split())
    assert list(tmp_path.iterdir()) == []


# --- the ci run, the claims, the live functions ---------------------------------------------------------------------
def test_ci_run_has_the_documented_dims_and_claims(ci_result):
    from lab.methods.rate.claims import CLAIMS

    res = ci_result("rate")
    ds, cfg = res.data, Config.from_profile("ci")
    assert ds.success.dims == ("seed", "variant", "length") == ds.turn_accuracy.dims
    assert list(ds.variant.values) == list(VARIANTS) and list(ds.length.values) == list(cfg.eval_lengths)
    assert ((ds.success >= 0) & (ds.success <= 100)).all() and (ds.success <= ds.turned).all()
    assert ds.minigrid_success.dims == ("seed", "variant")
    assert [r.name for r in res.claims] == [c.name for c in CLAIMS]
    # every claim is computed; turn accuracy is undefined where no episode reached the junction, and says so
    assert all(np.isfinite(r.measured) or "no turn to judge" in r.detail for r in res.claims)
    # ci trains long enough that the ablation walks to the junction: its turn accuracy is a number
    turned = ds.turned.sel(variant="rate_no_valve", length=max(cfg.eval_lengths))
    ablation = {r.name: r for r in res.claims}["no_valve_behaves_like_dt"]
    assert float(turned.max()) > 0 and np.isfinite(ablation.measured)


def _ds(success: dict, seeds=3, lengths=(10, 30, 90, 300), turned: dict | None = None):
    """A synthetic run: success per variant and length (seed 1 one point lower); every episode turned unless
    ``turned`` says otherwise (then success counts within the turned episodes as well)."""
    values = np.array([[np.asarray(success[v], float) - (s % 2) for v in VARIANTS] for s in range(seeds)])
    reach = np.array([[np.asarray((turned or {}).get(v, [100] * len(lengths)), float) for v in VARIANTS]
                      for _ in range(seeds)])
    dims = ("seed", "variant", "length")
    return xr.Dataset({"success": (dims, values), "turned": (dims, reach),
                       "turn_accuracy": (dims, np.divide(100.0 * values, reach, out=np.full_like(values, np.nan),
                                                         where=reach > 0))},
                      coords={"seed": np.arange(seeds), "variant": list(VARIANTS), "length": list(lengths)},
                      attrs={"segment_length": 10, "train_max": 30, "envs": "tmaze", "minigrid_size": 7})


PAPER = {"rate": [100, 100, 100, 99], "rate_no_valve": [100, 100, 60, 50], "rate_detached": [100, 100, 100, 90],
         "dt_short": [100, 50, 51, 50], "dt_long": [100, 100, 50, 50], "gru": [100, 100, 90, 70]}


def _verdicts(ds):
    from lab.methods.rate.claims import CLAIMS

    return {c.name: c.evaluate(ds) for c in CLAIMS}


def test_claims_hold_with_the_papers_effect_and_their_controls_fail():
    v = _verdicts(_ds(PAPER))
    for name in ("rate_far_beyond_training", "dt_falls_to_chance", "no_valve_behaves_like_dt"):
        assert v[name].verdict == "holds", (name, v[name])
        assert v[name].control_passed is False and len(v[name].per_seed) == 3
        assert v[name].competent is True
    assert v["rate_far_beyond_training"].headline
    assert v["rate_far_beyond_training"].measured == pytest.approx(99 - 1 / 3)
    # the control is the strongest baseline per seed: the GRU's 70, 69, 70 at the longest corridor
    assert v["rate_far_beyond_training"].control_measured == pytest.approx(70 - 1 / 3)
    assert "gru, gru, gru" in v["rate_far_beyond_training"].control_detail
    assert [c.measured for c in v["rate_far_beyond_training"].competence] == pytest.approx([100 - 1 / 3] * 3)
    assert v["dt_falls_to_chance"].measured == pytest.approx(np.mean([50, 51, 50]) - 1 / 3)
    # the long DT and the GRU solve the training length too: reaching it is not RATE's alone
    assert v["rate_at_training_length"].verdict == "does not discriminate"
    assert v["rate_at_training_length"].control_measured == pytest.approx(100 - 1 / 3)
    assert v["gru_beyond_training"].verdict == "reported" and v["minigrid_memory"].verdict == "reported"
    assert v["detached_memory_against_backprop"].verdict == "reported"
    assert v["detached_memory_against_backprop"].measured == pytest.approx(-9)
    assert "not run at this profile" in v["minigrid_memory"].detail


def test_rate_is_compared_with_the_strongest_competent_baseline():
    gru_remembers = {**PAPER, "gru": [100, 100, 100, 95]}  # the GRU matches RATE at 10x: RATE does not beat it
    v = _verdicts(_ds(gru_remembers))["rate_far_beyond_training"]
    assert v.verdict == "does not discriminate" and v.control_passed and "gru" in v.control_detail
    per_seed = {**PAPER, "dt_long": [100, 100, 50, 90], "gru": [100, 100, 90, 85]}  # the best of either, per seed
    ds = _ds(per_seed)
    ds["success"].loc[dict(seed=1, variant="dt_long", length=300)] = 40.0
    v = _verdicts(ds)["rate_far_beyond_training"]
    assert v.control_measured == pytest.approx(np.mean([90, 84, 90]))
    assert "dt_long, gru, dt_long" in v.control_detail
    unlearned = {**PAPER, "dt_long": [70, 60, 50, 50]}  # fails at 10x, but never learned its own training length
    v = _verdicts(_ds(unlearned))["rate_far_beyond_training"]
    assert v.verdict == "control not competent" and v.control_passed is False
    assert [c.passed for c in v.competence] == [True, False, True]
    short_blind = {**PAPER, "dt_short": [70, 50, 50, 50]}  # a short DT that fails even with the clue in view
    assert _verdicts(_ds(short_blind))["rate_far_beyond_training"].verdict == "control not competent"
    # at the training length RATE holds only against baselines that learned the maze (>= 95% at K) but miss T_train
    behind = {**PAPER, "dt_long": [100, 90, 50, 50], "gru": [100, 92, 80, 60]}
    v = _verdicts(_ds(behind))["rate_at_training_length"]
    assert v.verdict == "holds" and v.control_measured == pytest.approx(92 - 1 / 3)
    sloppy = {**PAPER, "dt_long": [90, 90, 50, 50], "gru": [94, 92, 80, 60]}  # not even solved at K
    assert _verdicts(_ds(sloppy))["rate_at_training_length"].verdict == "control not competent"


def test_far_corridor_compares_with_the_baselines_tested_there():
    # 100 x T_train: the DTs not tested (NaN), the GRU forgets, RATE holds
    far = {v: [*x, np.nan if v.startswith("dt_") else x[-1]] for v, x in PAPER.items()}
    far.update(gru=[100, 100, 100, 100, 55], rate=[100, 100, 100, 99, 97])
    ds = _ds(far, lengths=(10, 30, 90, 300, 3000))
    v = _verdicts(ds)
    head = v["rate_far_beyond_training"]
    assert head.verdict == "holds" and head.measured == pytest.approx(97 - 1 / 3)
    assert head.control_measured == pytest.approx(55 - 1 / 3) and "gru, gru, gru" in head.control_detail
    assert "dt_short, dt_long not tested at this length" in head.control_detail
    assert [c.passed for c in head.competence] == [True, True, True]  # the DTs' competence: where they are tested
    assert v["dt_falls_to_chance"].measured == pytest.approx(np.mean([50, 51, 50]) - 1 / 3)  # 3000 left out
    assert v["dt_long_context_beyond_training"].measured == pytest.approx(50 - 1 / 3)  # at 300, its longest
    from lab.methods.rate import plots

    text = plots.discussion(ds)
    assert "At 300 steps" in text and "At 3000 steps" in text and "DT, context K not tested" in text
    assert plots.success_plot(ds) is not None
    remembers = {**far, "gru": [100, 100, 100, 100, 95]}  # the GRU holds the clue at 100x too
    assert _verdicts(_ds(remembers, lengths=(10, 30, 90, 300, 3000)))["rate_far_beyond_training"].verdict == \
        "does not discriminate"


def test_claims_fail_or_do_not_discriminate_without_the_effect():
    forgets = {**PAPER, "rate": [100, 100, 55, 50]}  # RATE loses the clue like the DT
    v = _verdicts(_ds(forgets))
    assert v["rate_far_beyond_training"].verdict == "fails"
    assert v["no_valve_behaves_like_dt"].verdict == "does not discriminate"
    same = {**PAPER, "rate_no_valve": PAPER["rate"]}  # the valve changes nothing
    assert _verdicts(_ds(same))["no_valve_behaves_like_dt"].verdict == "fails"
    remembers = {**PAPER, "dt_short": [100, 100, 100, 100]}  # a DT that somehow remembers
    v = _verdicts(_ds(remembers))
    assert v["rate_far_beyond_training"].verdict == "does not discriminate"
    assert v["dt_falls_to_chance"].verdict == "fails"
    broken = {**PAPER, "dt_short": [50, 50, 50, 50]}  # a DT that fails even with the clue in view
    assert _verdicts(_ds(broken))["dt_falls_to_chance"].verdict == "control not competent"
    untrained = {**PAPER, "rate": [100, 70, 70, 70], "rate_no_valve": [100, 50, 50, 50]}  # RATE below 80% at T_train
    assert _verdicts(_ds(untrained))["no_valve_behaves_like_dt"].verdict == "control not competent"
    # lost in the corridor, not forgetting: half the episodes never reach the junction, those that do turn right
    lost = {**PAPER, "rate_no_valve": [100, 100, 60, 50]}
    v = _verdicts(_ds(lost, turned={"rate_no_valve": [100, 100, 60, 50]}))["no_valve_behaves_like_dt"]
    assert v.verdict == "fails" and v.measured > 95 and "50% of its episodes reached the junction" in v.detail
    stuck = _ds(lost, turned={"rate_no_valve": [100, 100, 60, 0]})  # none turned: nothing to judge, no verdict
    stuck["turn_accuracy"].loc[dict(variant="rate_no_valve", length=300)] = np.nan
    v = _verdicts(stuck)["no_valve_behaves_like_dt"]
    assert v.verdict == "fails" and np.isnan(v.measured) and "no turn to judge" in v.detail


def test_live_rollout_returns_what_it_says(ci_result):
    from lab.methods.rate import live, plots

    ci_result("rate")  # the ci run trained (and cached) the agents
    cfg = Config.from_profile("ci")
    ep = live.rollout("ci", "rate", 13, 0, episode_seed=2)
    assert set(ep) >= {"positions", "actions", "clue", "success", "memory_attention", "corridor_length"}
    assert ep["positions"].shape == (14, 2) and ep["actions"].shape == (13,) and ep["clue"] in (-1, 1)
    assert ep["memory_attention"].shape == (13 // cfg.segment_length, cfg.n_memory, cfg.n_memory)
    assert ep["success"] == (ep["positions"][-1, 1] == ep["clue"])
    assert live.rollout("ci", "dt_short", 13, 0)["memory_attention"] is None
    assert live.rollout("ci", "rate", 3, 0)["memory_attention"].shape[0] == 0  # no boundary before the turn
    mg = live.rollout("ci", "gru", 0, 0, env="minigrid")
    assert mg["positions"].shape[1] == 2 and mg["clue"] in (-1, 1)
    curve = live.success_curve("ci", ["rate", "dt_short"])
    assert list(curve.variant.values) == ["rate", "dt_short"] and curve.success.dims == ("seed", "variant", "length")
    shown = live.shown_length(curve)
    assert shown in curve.length.values and shown <= 10 * curve.attrs["train_max"]
    assert all(L <= shown or L > 10 * curve.attrs["train_max"] for L in curve.length.values)
    with pytest.raises(ConfigError, match="factor=0 is not allowed"):
        live.shown_length(curve, factor=0)
    for plot in (plots.rollout_plot(ep), plots.memory_attention_plot(ep), plots.success_plot(curve),
                 plots.rollout_plot(mg)):
        assert plot is not None
    assert "At the training length" in plots.discussion(ci_result("rate").data)


def test_trainings_in_worker_processes_give_the_weights_of_a_training_here(tmp_path, monkeypatch):
    """train_all trains every missing agent side by side in worker processes (lab.core.parallel), into the weight
    cache; each is bit for bit the agent trained in this process, and a second call has nothing left to train."""
    from lab.methods.rate import minigrid, pool
    from lab.methods.rate import train as T

    monkeypatch.setenv("LAB_WORKERS", "2")
    monkeypatch.setattr(pool, "SERIAL_BELOW_STEPS", 0)  # a pool even for a few steps
    cfg = Config.from_profile("ci", steps=3, n_seeds=1)
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "pool"))
    done = pool.train_all(cfg, progress=False)
    assert len(done) == 2 * len(VARIANTS) and all(r.ran for r in done)
    assert not any(r.ran for r in pool.train_all(cfg, progress=False))

    def agents():
        return [T.trained(cfg, v, cfg.seed) for v in VARIANTS] + [minigrid.trained(cfg, v, cfg.seed)
                                                                   for v in VARIANTS]

    pooled = agents()
    assert all(t.loaded for t in pooled)
    assert_trained_here_as_pooled(monkeypatch, tmp_path, cfg.threads, pooled, agents)
