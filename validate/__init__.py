"""Node fitness checks: is this node fit to run a chexstack stack at full speed, and what to fix.

Parsers (``validate.parsers``) turn recorded tool output into typed values and never run tools; checks
(``validate.checks``) run tools, call parsers and return a ``CheckResult``; ``validate.report`` decides the
table, the JSON and the exit code in one place.
"""
