"""The T-Maze (numpy), its oracle trajectories (the offline data) and closed-loop rollouts of any agent.

The T-Maze of RATE's repository (after Ni et al.'s passive T-Maze): a corridor of ``L`` cells ``x = 0 .. L-1``; the
last cell is the junction, with one goal arm above (``y = +1``) and one below (``y = -1``). An episode lasts ``L``
steps: ``L - 1`` moves along the corridor, then the turn. Each observation is ``[y, clue, flag, noise]``:

* ``clue`` = ±1 only at ``t = 0`` (which arm is rewarded), 0 afterwards;
* ``flag`` = 1 at the junction (the step before the arms: the agent must turn now), 0 elsewhere;
* ``noise`` uniform in {-1, 0, 1} at every step (a distractor).

Actions: 0 right (along the corridor), 1 up, 2 down, 3 left; moves into a wall leave the agent in place. Reward 1
only for turning into the clue's arm at the end (0 otherwise); the episode ends with the turn or after ``L`` steps.
Only the final turn needs memory: every other step is "right", whatever the clue. ``L >= 2``: with ``L = 1`` the
clue and the flag would share the only step and there would be no corridor.

:func:`rollout` runs a batch of episodes closed loop: the agent sees each observation, acts (greedy), the maze
steps; an agent is anything with ``start(batch)``, ``act(state, rtg, obs)`` and ``observe(state, action)``
(:mod:`.model`). :func:`outcomes` gives the same successes and turns faster: one batched forward over the episode an
agent that keeps walking right would see, then the step-by-step rollout only for the episodes whose greedy actions
leave that path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lab.checks import bad_value

__all__ = ["DOWN", "LEFT", "N_ACTIONS", "OBS_DIM", "RIGHT", "UP", "Trajectories", "TMaze", "check_corridor",
           "oracle", "outcomes", "rollout"]

RIGHT, UP, DOWN, LEFT = range(4)
N_ACTIONS = 4
OBS_DIM = 4
_MOVES = {RIGHT: (1, 0), UP: (0, 1), DOWN: (0, -1), LEFT: (-1, 0)}


def check_corridor(length, name: str = "corridor_length") -> int:
    """``length`` as an int >= 2, or a ConfigError naming ``name``."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or int(length) < 2:
        raise bad_value(name, length, "an integer >= 2 (a corridor and a junction; with 1 the clue and the flag "
                                      "share the only step)")
    return int(length)


class TMaze:
    """One T-Maze episode at a time, gymnasium-style: ``reset() -> (obs, info)``, ``step(a) -> (obs, reward,
    terminated, truncated, info)``.

    Arguments:
        corridor_length: L >= 2 (the episode's steps). seed: the generator of clues and noise.
    """

    def __init__(self, corridor_length: int, seed: int = 0):
        self.length = check_corridor(corridor_length)
        self.rng = np.random.default_rng(seed)
        self.clue, self.x, self.y, self.t = 1, 0, 0, 0

    def _obs(self) -> np.ndarray:
        clue = self.clue if self.t == 0 else 0
        flag = 1.0 if (self.x == self.length - 1 and self.y == 0) else 0.0
        return np.array([self.y, clue, flag, self.rng.integers(-1, 2)], dtype=np.float32)

    def reset(self, clue: int | None = None) -> tuple[np.ndarray, dict]:
        self.clue = int(self.rng.choice([-1, 1])) if clue is None else int(clue)
        self.x, self.y, self.t = 0, 0, 0
        return self._obs(), {"clue": self.clue}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        dx, dy = _MOVES[int(action)]
        at_junction = self.x == self.length - 1
        if dy != 0 and at_junction:
            self.y = dy
        elif dy == 0 and 0 <= self.x + dx <= self.length - 1:
            self.x += dx
        self.t += 1
        terminated = self.y != 0
        reward = float(terminated and self.y == self.clue)
        truncated = not terminated and self.t >= self.length
        return self._obs(), reward, terminated, truncated, {"x": self.x, "y": self.y}


@dataclass
class Trajectories:
    """A batch of episodes of one length: ``rtg (n, T)``, ``obs (n, T, 4)``, ``actions (n, T)`` int64, the loss
    ``weights (n, T)``, the ``clues (n,)``."""

    rtg: torch.Tensor
    obs: torch.Tensor
    actions: torch.Tensor
    weights: torch.Tensor
    clues: torch.Tensor

    def __len__(self) -> int:
        return len(self.clues)

    def take(self, idx) -> Trajectories:
        return Trajectories(self.rtg[idx], self.obs[idx], self.actions[idx], self.weights[idx], self.clues[idx])


def oracle(length: int, n: int, rng: np.random.Generator, turn_weight: float = 1.0) -> Trajectories:
    """``n`` successful oracle episodes of a corridor of ``length``: right, ..., right, then the clue's turn.

    The return-to-go is 1 at every step (the only reward, 1, comes at the end). ``turn_weight`` weighs the final
    turn's loss against each corridor step's.
    """
    length = check_corridor(length)
    clues = rng.choice(np.array([-1, 1]), size=n)
    obs = np.zeros((n, length, OBS_DIM), np.float32)
    obs[:, 0, 1] = clues
    obs[:, -1, 2] = 1.0
    obs[:, :, 3] = rng.integers(-1, 2, size=(n, length))
    actions = np.full((n, length), RIGHT, np.int64)
    actions[:, -1] = np.where(clues > 0, UP, DOWN)
    weights = np.ones((n, length), np.float32)
    weights[:, -1] = turn_weight
    return Trajectories(torch.ones(n, length), torch.from_numpy(obs), torch.from_numpy(actions),
                        torch.from_numpy(weights), torch.from_numpy(clues))


@torch.no_grad()
def rollout(agent, length: int, clues: np.ndarray, rng: np.random.Generator | None, *, record: bool = False,
            noise: np.ndarray | None = None) -> dict:
    """Closed-loop episodes of a corridor of ``length``, one per clue, batched: the agent acts greedily on every
    observation and the mazes step (memory carried by the agent through the whole episode). The distractor of step
    ``t`` is ``rng.integers(-1, 2, size=n)``, or ``noise[t]`` when ``noise (length, n)`` is given.

    Returns:
        ``{"success" (n,) bool, "actions" (n, T), "positions" (n, T + 1, 2) (x, y) from the start, "clues" (n,)}``
        and, with ``record``, whatever the agent recorded in its state (``state["record"]``).
    """
    length = check_corridor(length)
    clues = np.asarray(clues, np.int64)
    n = len(clues)
    x, y = np.zeros(n, np.int64), np.zeros(n, np.int64)
    done = np.zeros(n, bool)
    positions = np.zeros((n, length + 1, 2), np.int64)
    actions = np.zeros((n, length), np.int64)
    state = agent.start(n, record=record)
    rtg = torch.ones(n)
    for t in range(length):
        obs = np.zeros((n, OBS_DIM), np.float32)
        obs[:, 0] = y
        if t == 0:
            obs[:, 1] = clues
        obs[:, 2] = ((x == length - 1) & (y == 0)).astype(np.float32)
        obs[:, 3] = rng.integers(-1, 2, size=n) if noise is None else noise[t]
        logits = agent.act(state, rtg, torch.from_numpy(obs))
        a = logits.argmax(-1).numpy()
        a = np.where(done, RIGHT, a)  # finished episodes idle
        actions[:, t] = a
        agent.observe(state, torch.from_numpy(a))
        junction = x == length - 1
        turn = (a == UP) | (a == DOWN)
        new_y = np.where(turn & junction & ~done, np.where(a == UP, 1, -1), y)
        dx = np.where(a == RIGHT, 1, np.where(a == LEFT, -1, 0))
        x = np.where(done | turn, x, np.clip(x + dx, 0, length - 1))
        y = new_y
        done |= y != 0
        positions[:, t + 1, 0], positions[:, t + 1, 1] = x, y
    out = {"success": y == clues, "actions": actions, "positions": positions, "clues": clues}
    if record:
        out["record"] = state.get("record")
    return out


@torch.no_grad()
def outcomes(agent, length: int, clues: np.ndarray, rng: np.random.Generator) -> dict:
    """What :func:`rollout` returns as ``success`` and whether each episode turned at the junction (``turned``,
    either way), both ``(n,)`` bool, for an agent with a batched ``forward`` (:mod:`.model`), with the same noise.

    An episode that walks right at every step before the junction sees exactly the observations of one batched
    forward with every action "right" (the clue at t = 0, the flag at t = L - 1, the noise); its greedy action at
    the junction decides it. Episodes whose greedy action leaves that path anywhere earlier are run step by step
    (:func:`rollout` with the same noise). The batched and step forms agree to float rounding (a test checks
    both). A DT whose ``context`` is shorter than the episode reads a sliding window at every step: it is run step
    by step (batching its windows costs as much: the same attention over every window)."""
    length = check_corridor(length)
    clues = np.asarray(clues, np.int64)
    n = len(clues)
    if getattr(agent, "context", length) < length:
        out = rollout(agent, length, clues, rng)
        return {"success": out["success"], "turned": out["positions"][:, -1, 1] != 0}
    noise = np.stack([rng.integers(-1, 2, size=n) for _ in range(length)])  # (T, n): the rollout's draws, in order
    obs = np.zeros((n, length, OBS_DIM), np.float32)
    obs[:, 0, 1], obs[:, -1, 2], obs[:, :, 3] = clues, 1.0, noise.T
    rtg, actions = torch.ones(n, length), torch.full((n, length), RIGHT, dtype=torch.long)
    greedy = agent(rtg, torch.from_numpy(obs), actions).argmax(-1).numpy()
    path = (greedy[:, :-1] == RIGHT).all(1)
    last = greedy[:, -1]
    turned = path & ((last == UP) | (last == DOWN))
    success = turned & (np.where(last == UP, 1, -1) == clues)
    if not path.all():
        off = ~path
        out = rollout(agent, length, clues[off], None, noise=noise[:, off])
        success[off], turned[off] = out["success"], out["positions"][:, -1, 1] != 0
    return {"success": success, "turned": turned}
