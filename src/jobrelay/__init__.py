"""jobrelay: dispatch Kubernetes Jobs with ``spec.managedBy`` to a fleet of worker clusters."""

# The one version of a release: pyproject.toml reads it, and the charts' version and
# appVersion must equal it (`make version VERSION=X.Y.Z` sets all three; docs/release.md).
__version__ = "0.3.0"
