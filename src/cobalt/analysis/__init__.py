"""Analyses of multi-turn results: Pass@1 reports (``report``) and the in-context reward-hacking study (``hacking``, ``judge``, ``hacking_report``)."""
