"""Analyses of multi-turn results: the in-context reward-hacking study (``hacking``, ``judge``, ``hacking_report``)."""
