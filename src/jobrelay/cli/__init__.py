"""The `jobrelay` CLI: every command's errors speak kubectl's one style (error_style)."""

from jobrelay.cli.error_style import install as _install_error_style

_install_error_style()
