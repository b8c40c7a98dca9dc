"""batch/v1 Job: mirrors, the never-backwards status translation, the Job status contract.

Nothing here does I/O; an import-linter contract keeps the kube layer out.
"""

from jobrelay.vocabulary.json_types import JsonObj

__all__ = ["JsonObj"]
