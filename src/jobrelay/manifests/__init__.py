"""Manifests jobrelay generates for its deployment (pure: text from settings, no I/O)."""
