"""Node fitness checks: is this node fit to run a chexstack stack at full speed, and what to fix.

Checks (``validate.checks``) read the node through ``validate.evidence`` (live, recorded into a bundle, or
replayed from one), call the parsers of ``facts.parsers`` and return a ``CheckResult``; ``validate.report``
decides the table, the JSON and the exit code in one place.
"""
