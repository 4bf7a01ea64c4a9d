"""The run wing: what the experiments hand the engine, and everything that touches a run directory.

    registry      the experiments, in one list (run.json records the name; `load_run` reads it)
    cli           the command line every ``python -m experiments.<name>`` shares
    claim         what one part of a run may do with its directory, and what is left however it ends
    overwrite     --overwrite sets the old run aside until the new one starts, and puts it back if it never does
    replot        --replot DIR: a finished run of this experiment, checked, redrawn under its lock
    environment   XLA_FLAGS and JAX_* values checked before jax reads them
    config_parse  text in, config out: dotted overrides (also from Python: `override`), config.json
    empty_lists   --a.b= where --help says what an empty list means
    rundir        a run directory is owned: lock, what is the run's own, clean-up, nesting
    manifest      which paths are the run's own (``.manifest.json``)
    files         results files written atomically, paths in messages kept to one line
    provenance    code, packages, device; what changes a run's numbers besides its config
    runinfo       the run's fingerprint, run.json (experiment, timings, provenance kept)
    checkpoint    orbax checkpoints of the member-stacked state, verified on restore
    tensorboard   metrics rows as TensorBoard event files
    sink          the engine's writer into a run directory (`RunFiles`: a `jaxinit.train.writer.Writer`)
    runs          `load_run(dir)`: a finished run, for notebooks

The engine (`jaxinit.train`) imports nothing from here; a study hands it a writer from `sink`.
Nothing is imported here, so each module loads only what it needs (`runs` loads no jax).
"""
