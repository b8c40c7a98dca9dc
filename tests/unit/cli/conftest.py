"""Every CLI test starts from the same environment: a `JOBRELAY_NAMESPACE` the developer
set for their own fleet must not point the commands elsewhere."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_namespace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBRELAY_NAMESPACE", raising=False)
