"""The charts' manifests the CLI prints or applies, read from the package (links into
``charts/``) and filled in for its flags (pure: no I/O beyond the package's own files)."""
