"""The WebShop tests share a writer of the official data format (``webshop_official_sample``) beside them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
