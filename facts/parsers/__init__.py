"""Parsers of real tool output (nvidia-smi, ibstat, nccl-tests, horovodrun, scontrol, ...): text in, typed values out.

Each parser accepts partial or cut-off output and records what it could not read instead of raising. Which command
lines (and which recorded forms of them) a parser reads is said next to it by an ``Observation``
(``facts.parsers.observation``: ``nvidia_smi.PROPERTIES``, ``infiniband.IBV_DEVINFO``, ...), which the node checks
run with ``Context.observe`` / ``Context.first``.
"""
