"""Decide, not only measure: paired comparison of runs, significance, power, gates, history.

Reads run directories only (never Milvus). ``catalog`` lists what is compared, ``stats`` how
(paired randomisation test, bootstrap intervals, Holm, minimum detectable difference),
``gates`` what must hold, ``rundir`` what a run directory holds, ``comparison`` puts them
together into ``compare.json``, ``history`` keeps the nightly trend and the accepted baseline.
"""
