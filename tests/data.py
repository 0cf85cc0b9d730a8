"""The reference data the tests read: ../shared/data beside the checkout (its
SOURCES.md says where each file comes from). CI has it, so a checkout without
it is broken: a test that needs it fails saying so, it is never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def require(path: Path) -> Path:
    """path, or a failure naming it when it does not exist."""
    if not path.exists():
        pytest.fail(f"{path} is missing: the tests need the reference data in {SHARED_DATA} "
                    "(../shared/data beside the checkout)", pytrace=False)
    return path
