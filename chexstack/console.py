"""The rich console every task prints through (stderr stays free for tools' own logs)."""
from __future__ import annotations

from rich.console import Console

console = Console(highlight=False)
