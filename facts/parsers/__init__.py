"""Parsers of real tool output (nvidia-smi, ibstat, nccl-tests, horovodrun, ...): text in, typed values out.

Each parser accepts partial or cut-off output and records what it could not read instead of raising.
"""
