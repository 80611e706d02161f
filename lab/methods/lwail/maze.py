"""A 2-D point-mass U-maze written with numpy (the Maze2D analogue): dynamics, geodesic distances, the expert.

The layout is D4RL's ``maze2d-umaze`` drawn in coarse cells (``#`` wall, ``S`` start, ``G`` goal)::

    #######
    #G....#
    #####.#
    #S....#
    #######

Each coarse cell is split into ``resolution x resolution`` fine cells. The point mass sits at the centre of a fine
cell; its state is its position ``(x, y)`` in coarse-cell units (continuous coordinates, what the networks see). An
action moves it one fine cell in one of 8 directions; a move into a wall, or a diagonal move that would cut a wall's
corner, leaves it where it is. With probability ``slip`` the action is replaced by a random one (stochastic
dynamics, so that a goal-reach *rate* means something). There is no termination: an episode lasts ``horizon`` steps,
unless ``crash`` is set: then choosing a move into a wall (or across a wall's corner) ends the episode, as a fall ends
a MuJoCo episode (a slip never does: the chosen move counts).

Geodesic distances are breadth-first search over the same 8 moves (the number of steps a perfect agent needs).
The expert's one state-only episode is a shortest path from the start to the goal.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ACTIONS", "LAYOUT", "Maze", "make_maze"]

LAYOUT = ("#######",
          "#G....#",
          "#####.#",
          "#S....#",
          "#######")
#: the 8 moves (dx, dy) in fine cells; y grows downwards as the rows of the layout
ACTIONS = np.array([(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)], dtype=np.int64)


@dataclass
class Maze:
    """The fine grid of a layout and everything derived from it.

    Attributes:
        free: ``(H, W)`` bool, True on free fine cells. start, goal: ``(row, col)`` fine cells (centres of the
        coarse S and G cells). resolution: fine cells per coarse cell. cells: ``(n_free, 2)`` the free cells.
    """

    free: np.ndarray
    start: tuple[int, int]
    goal: tuple[int, int]
    resolution: int
    cells: np.ndarray = field(init=False)
    index: np.ndarray = field(init=False)
    _dist: dict = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.cells = np.argwhere(self.free)
        self.index = np.full(self.free.shape, -1, np.int64)
        self.index[self.free] = np.arange(len(self.cells))

    @property
    def shape(self) -> tuple[int, int]:
        return self.free.shape

    def xy(self, cells: np.ndarray) -> np.ndarray:
        """Fine cells ``(..., 2)`` as ``(row, col)`` -> positions ``(..., 2)`` as ``(x, y)`` in coarse units."""
        cells = np.asarray(cells)
        return ((cells[..., ::-1] + 0.5) / self.resolution).astype(np.float32)

    def normalise(self, xy: np.ndarray) -> np.ndarray:
        """Positions centred and scaled by the maze's longer side into [-1, 1] (what the networks take). The
        scale is the same on both axes, so that Euclidean distances between inputs are Euclidean distances in the
        plane (the φ = identity control)."""
        h, w = self.shape
        size = np.array([w, h], np.float32) / self.resolution
        return (2.0 * (np.asarray(xy, np.float32) - size / 2) / size.max()).astype(np.float32)

    def obs(self, cells: np.ndarray) -> np.ndarray:
        """The networks' input for fine cells ``(..., 2)``: normalised positions ``(..., 2)``."""
        return self.normalise(self.xy(cells))

    def onehot(self, cells: np.ndarray) -> np.ndarray:
        """The policy's input for fine cells ``(n, 2)``: one-hot over the free cells ``(n, n_free)``."""
        cells = np.asarray(cells, np.int64)
        out = np.zeros((len(cells), len(self.cells)), np.float32)
        out[np.arange(len(cells)), self.index[cells[:, 0], cells[:, 1]]] = 1.0
        return out

    def moves(self, cells: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Where each of ``cells (n, 2)`` goes under ``actions (n,)`` (deterministic: no slip)."""
        d = ACTIONS[actions][:, ::-1]  # (n, 2) as (drow, dcol)
        target = cells + d
        h, w = self.shape
        inside = (target[:, 0] >= 0) & (target[:, 0] < h) & (target[:, 1] >= 0) & (target[:, 1] < w)
        t = np.clip(target, 0, [h - 1, w - 1])
        ok = inside & self.free[t[:, 0], t[:, 1]]
        # no corner cutting: both orthogonal neighbours of a diagonal move must be free
        side_a = np.clip(cells + np.stack([d[:, 0], np.zeros_like(d[:, 0])], 1), 0, [h - 1, w - 1])
        side_b = np.clip(cells + np.stack([np.zeros_like(d[:, 1]), d[:, 1]], 1), 0, [h - 1, w - 1])
        ok &= self.free[side_a[:, 0], side_a[:, 1]] & self.free[side_b[:, 0], side_b[:, 1]]
        return np.where(ok[:, None], target, cells)

    def step(self, cells: np.ndarray, actions: np.ndarray, slip: float, rng: np.random.Generator) -> np.ndarray:
        """One step of ``n`` point masses: ``cells (n, 2)``, ``actions (n,)`` -> next cells ``(n, 2)``."""
        actions = np.asarray(actions, np.int64)
        if slip > 0:
            flip = rng.random(len(actions)) < slip
            actions = np.where(flip, rng.integers(0, 8, len(actions)), actions)
        return self.moves(np.asarray(cells, np.int64), actions)

    def distances(self, target: tuple[int, int]) -> np.ndarray:
        """Geodesic distance (moves) from every fine cell to ``target`` by BFS; ``inf`` on walls and cut-off
        cells. Cached per target."""
        target = (int(target[0]), int(target[1]))
        if target in self._dist:
            return self._dist[target]
        h, w = self.shape
        dist = np.full((h, w), np.inf)
        if not self.free[target]:
            raise ValueError(f"target {target} is a wall")
        dist[target] = 0
        queue = deque([target])
        while queue:
            cell = queue.popleft()
            here = np.array([cell])
            # moves are symmetric (a move and its reverse are allowed together), so BFS from the target works
            for a in range(8):
                nxt = tuple(int(v) for v in self.moves(here, np.array([a]))[0])
                if nxt != cell and dist[nxt] == np.inf:
                    dist[nxt] = dist[cell] + 1
                    queue.append(nxt)
        self._dist[target] = dist
        return dist

    def geodesic_matrix(self) -> np.ndarray:
        """``(n_free, n_free)`` geodesic distances between every pair of free cells."""
        return np.stack([self.distances(tuple(c))[self.free] for c in self.cells])

    def expert_path(self) -> np.ndarray:
        """A shortest path ``(T, 2)`` of fine cells from the start to the goal (ties broken by action order)."""
        dist = self.distances(self.goal)
        path = [np.array(self.start)]
        while tuple(path[-1]) != self.goal:
            here = np.repeat(path[-1][None], 8, 0)
            nxt = self.moves(here, np.arange(8))
            d = dist[nxt[:, 0], nxt[:, 1]]
            path.append(nxt[int(np.argmin(d))])
        return np.stack(path)

    def expert_episode(self, steps: int = 0) -> np.ndarray:
        """The expert's demonstration ``(max(T, steps + 1), 2)``: the shortest path (:meth:`expert_path`), then,
        until the episode has ``steps`` moves, dwelling at the goal by stepping back and forth between the goal and
        the path's last cell before it (both within one move of the goal; no move into a wall, so no crash where
        episodes end on one). ``steps = 0``: the bare path."""
        path = self.expert_path()
        extra = max(0, steps + 1 - len(path))
        dwell = [path[-2] if k % 2 == 0 else path[-1] for k in range(extra)]
        return np.concatenate([path, np.array(dwell, np.int64).reshape(-1, 2)]) if extra else path

    def expert_actions(self, cells: np.ndarray) -> np.ndarray:
        """The greedy shortest-path action of every cell ``(n, 2)`` (the expert as a policy)."""
        dist = self.distances(self.goal)
        n = len(cells)
        nxt = self.moves(np.repeat(cells, 8, 0), np.tile(np.arange(8), n)).reshape(n, 8, 2)
        return np.argmin(dist[nxt[..., 0], nxt[..., 1]], axis=1)

    def reached(self, cells: np.ndarray) -> np.ndarray:
        """Whether each cell ``(n, 2)`` is within one move of the goal."""
        return self.distances(self.goal)[cells[:, 0], cells[:, 1]] <= 1

    def random_walks(self, n_traj: int, length: int, slip: float, rng: np.random.Generator) -> dict:
        """Random-policy trajectories from uniformly drawn free cells (ICVF's state-only data and the critic's
        pretraining negatives).

        Returns:
            ``{"cells": (n_traj, length + 1, 2)}`` fine cells, trajectory by trajectory.
        """
        cells = self.cells[rng.integers(0, len(self.cells), n_traj)]
        out = [cells]
        for _ in range(length):
            cells = self.step(cells, rng.integers(0, 8, n_traj), slip, rng)
            out.append(cells)
        return {"cells": np.stack(out, 1)}

    def blocked(self, cells: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Whether each of ``actions (n,)`` from ``cells (n, 2)`` is a move into a wall (the point stays): ``(n,)``
        bool, a crash where episodes end on one."""
        cells = np.asarray(cells, np.int64)
        return np.all(self.moves(cells, np.asarray(actions, np.int64)) == cells, axis=1)

    def rollout(self, policy, n: int, horizon: int, slip: float, rng: np.random.Generator,
                crash: bool = False) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        """``n`` episodes of ``policy(cells (n, 2)) -> actions (n,)`` from the start: cells
        ``(n, horizon + 1, 2)``. With ``crash``, an episode ends when the policy chooses a move into a wall: its
        cells stay where it crashed for the remaining steps, and the return is ``(cells, crashed (n,) bool)``
        (the random draws are the same either way)."""
        cells = np.repeat(np.array([self.start]), n, 0)
        out, dead = [cells], np.zeros(n, bool)
        for _ in range(horizon):
            act = policy(cells)
            if crash:
                dead |= self.blocked(cells, act)
            cells = np.where(dead[:, None], cells, self.step(cells, act, slip, rng))
            out.append(cells)
        return (np.stack(out, 1), dead) if crash else np.stack(out, 1)


def make_maze(resolution: int = 3, layout: tuple[str, ...] = LAYOUT) -> Maze:
    """The layout's fine grid: each coarse cell split into ``resolution x resolution`` fine cells."""
    rows = [list(r) for r in layout]
    coarse = np.array([[c != "#" for c in r] for r in rows])
    free = np.kron(coarse, np.ones((resolution, resolution), bool))
    where = {c: next((i, j) for i, r in enumerate(rows) for j, v in enumerate(r) if v == c) for c in "SG"}
    centre = resolution // 2
    start = (where["S"][0] * resolution + centre, where["S"][1] * resolution + centre)
    goal = (where["G"][0] * resolution + centre, where["G"][1] * resolution + centre)
    return Maze(free, start, goal, resolution)
