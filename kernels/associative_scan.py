"""A generic log-depth inclusive scan over pytrees of tensors, for any associative ``combine``.

The recursion is the odd/even (Brent-Kung style) scheme: combine neighbouring pairs, scan the half-length
sequence of pair results recursively, then fill in the even positions from the scanned odd ones. ``O(n)`` combine
work over ``O(log n)`` levels, each level one batched call of ``combine`` on strided slices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["associative_scan"]


def _flatten(tree) -> tuple[list[torch.Tensor], Callable[[list], Any]]:
    """Leaves of a pytree of tuples/lists/dicts of tensors, and a function rebuilding the tree from new leaves."""
    if isinstance(tree, torch.Tensor):
        return [tree], lambda leaves: leaves[0]
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(t) for t in tree]
        sizes = [len(p[0]) for p in parts]
        kind = type(tree)

        def build(leaves, parts=parts, sizes=sizes, kind=kind):
            out, i = [], 0
            for (_, rebuild), n in zip(parts, sizes):
                out.append(rebuild(leaves[i : i + n]))
                i += n
            return kind(out) if kind in (tuple, list) else kind(*out)  # namedtuples take positional fields

        return [leaf for p in parts for leaf in p[0]], build
    if isinstance(tree, dict):
        keys = list(tree)
        parts = [_flatten(tree[k]) for k in keys]
        sizes = [len(p[0]) for p in parts]

        def build_dict(leaves, parts=parts, sizes=sizes, keys=keys):
            out, i = {}, 0
            for k, (_, rebuild), n in zip(keys, parts, sizes):
                out[k] = rebuild(leaves[i : i + n])
                i += n
            return out

        return [leaf for p in parts for leaf in p[0]], build_dict
    raise TypeError(
        f"associative_scan: leaves must be tensors (in tuples, lists or dicts); got {type(tree).__name__}"
    )


def associative_scan(combine: Callable[[Any, Any], Any], elems, dim: int = 0, reverse: bool = False):
    """Inclusive scan ``out[i] = elems[0] (+) elems[1] (+) ... (+) elems[i]`` along ``dim``.

    Arguments:
        combine: associative ``combine(left, right)`` taking two pytrees shaped like ``elems`` (with any length along
            ``dim``) and returning one; ``left`` holds the earlier elements. It must work element-wise (batched)
            along ``dim``.
        elems: a tensor or a tuple/list/dict pytree of tensors, all with the same size along ``dim``.
        dim: the scan axis.
        reverse: scan from the end: ``out[i] = elems[n-1] (+) ... (+) elems[i]`` (``left`` holds the later elements,
            as in ``jax.lax.associative_scan``).

    Returns:
        A pytree shaped like ``elems`` holding the inclusive prefix combinations.

    Example (linear recurrence ``h_t = a_t h_{t-1} + b_t``)::

        combine = lambda l, r: (l[0] * r[0], r[0] * l[1] + r[1])
        _, h = associative_scan(combine, (a, b), dim=-1)
    """
    leaves, build = _flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems has no tensors")
    nd = leaves[0].dim()
    if not -nd <= dim < nd:
        raise ValueError(f"dim {dim} is out of range for tensors with {nd} dimensions")
    sizes = {leaf.shape[dim] for leaf in leaves}
    if len(sizes) != 1:
        shapes = [tuple(leaf.shape) for leaf in leaves]
        raise ValueError(f"associative_scan: all leaves need the same size along dim {dim}; got shapes {shapes}")
    moved = [leaf.movedim(dim, 0) for leaf in leaves]
    if reverse:  # as jax.lax.associative_scan: flip, scan, flip back (combine's left operand is the later part)
        moved = [m.flip(0) for m in moved]

    def wrapped(l_leaves, r_leaves):
        return _leaves_of(combine(build(l_leaves), build(r_leaves)))

    # the combine sees tensors with the scan axis first; give it back its own layout
    def combine_moved(l_leaves, r_leaves):
        out = wrapped([t.movedim(0, dim) for t in l_leaves], [t.movedim(0, dim) for t in r_leaves])
        return [t.movedim(dim, 0) for t in out]

    out = _scan(combine_moved, moved)
    if reverse:
        out = [o.flip(0) for o in out]
    return build([o.movedim(0, dim) for o in out])


def _leaves_of(tree) -> list[torch.Tensor]:
    return _flatten(tree)[0]


def _scan(combine, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    n = xs[0].shape[0]
    if n < 2:
        return xs
    # combine pairs (0,1), (2,3), ...
    pairs = combine([x[0:-1:2] for x in xs], [x[1::2] for x in xs])
    odd = _scan(combine, pairs)  # odd[k] = prefix up to element 2k+1
    # even positions 2, 4, ...: prefix up to 2k-1 combined with element 2k
    n_even_rest = (n - 1) // 2
    even_rest = combine([o[:n_even_rest] for o in odd], [x[2::2] for x in xs])
    out = []
    for x, o, e in zip(xs, odd, even_rest):
        evens = torch.cat([x[:1], e], dim=0)  # (ceil(n/2), ...)
        res = torch.empty((n,) + tuple(x.shape[1:]), dtype=o.dtype, device=o.device)
        if torch.is_grad_enabled() and (o.requires_grad or evens.requires_grad):
            # differentiable interleave: stack then flatten (pad the shorter half)
            if evens.shape[0] > o.shape[0]:
                o_pad = torch.cat([o, evens[-1:]], dim=0)
                res = torch.stack([evens, o_pad], dim=1).flatten(0, 1)[:n]
            else:
                res = torch.stack([evens, o], dim=1).flatten(0, 1)
        else:
            res[0::2] = evens
            res[1::2] = o
        out.append(res)
    return out
