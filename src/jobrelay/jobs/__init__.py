"""Pure Job logic: building mirrors, translating status, checking the Job status contract.

Nothing here does I/O; an import-linter contract keeps the kube layer out.
"""

from jobrelay.jobs.types import JsonObj

__all__ = ["JsonObj"]
