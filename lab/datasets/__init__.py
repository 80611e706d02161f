"""Data sets of the lab: generators, solvers and the shared on-disk cache (:mod:`lab.cache`)."""
