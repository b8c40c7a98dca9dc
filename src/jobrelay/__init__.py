"""jobrelay: dispatch Kubernetes Jobs with ``spec.managedBy`` to a fleet of worker clusters."""

__version__ = "0.1.0"
