"""The decision wing: choosing configurations from predictions and from the board.

One engine decides with the board in the loop: ``study`` (the history, ``ask`` and
``tell``), ``samplers`` (the strategies, one file each: the cap table, the per-cap
contest, random), ``terminator`` (the stop rule), ``candidates`` (what is chosen among,
the one cost rule, the pick) and ``settings`` (the settings and the one check of every
driver's inputs), on ``posterior`` (joint draws in which neighbouring configurations err
together) and ``loss`` (the cap table's expected loss). Its drivers are ``decide`` (a
sweep on the board: one cap or a cap table from one budget), ``tuner`` with
``tuner_loop`` (the job's own training steps) and ``cap_following`` (a cap that changes
at run time). Beside it: ``optimise`` (Pareto front, capped choice from predictions),
``refine`` (profiling where the decisions are), ``selection`` (batch size and mode
jointly, to accuracy) and ``evaluate``. The public names are re-exported lazily by the
package root (``pt.decide``, ``pt.Tuner``, ``pt.CapController``, ...); this package
imports nothing itself, so that importing one of its modules loads only that.
"""
