"""The decision wing: choosing configurations from predictions and from the board.

``decide`` (the board in the loop: one cap or a cap table from one budget),
``posterior`` (joint draws in which neighbouring configurations err together),
``loss`` (the cap table's expected loss and who would remove it), ``cap_following``
(a cap that changes at run time), ``refine`` (profiling where the decisions are) and
``selection`` (batch size and mode jointly, to accuracy). The public names are
re-exported lazily by the package root (``pt.decide``, ``pt.CapController``, ...); this
package imports nothing itself, so that importing one of its modules loads only that.
"""
