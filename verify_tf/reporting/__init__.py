"""The reports of a run, written and read back: ``report`` (the verdict table, the JSON report, exit codes),
``junit`` (JUnit XML), ``trace_view`` (one input's layer-by-layer trace, for ``run`` and the explorer) and
``audit`` (re-checking a JSON report offline).

Import the module you need (``from verify_tf.reporting.report import write_json``): this package imports none
of them, so that writing a JUnit file does not load what ``audit`` re-runs.
"""
