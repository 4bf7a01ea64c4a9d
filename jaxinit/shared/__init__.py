"""What the studies share, so that no study folder imports another (`jaxinit.forgetting`, `jaxinit.igb`,
`jaxinit.memory` each import from here, never from each other).

Modules: `phases` (phase points placed by the theory's solvers, a trained case), `nets` (a network and what the
probes read of it), `case_train` (a case's members on the engine: splits, groups, shared batches, per-class
evaluation, the arrays of the rows), `selection` (the fair protocol's rate choice: pure), `igb_stats` (f_max,
per-class metrics, Gram moments), `history` (one member's rows: selected step, interpolation, clocks),
`seed_stats` and `nulls` (statistics over seeds along a line of sigma_w and their permutation nulls), `sink`
(results files and figures of a run directory).
"""
