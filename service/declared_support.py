"""Declared-support reference lists shipped as data (``service/declared/*.json``): other stacks' own claims.

Served next to measured coverage and always labelled "declared, not measured".
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

DECLARED_DIR = Path(__file__).parent / "declared"


class DeclaredList(BaseModel):
    name: str  # e.g. "optimum-neuron"
    version: str  # e.g. "0.4.5"
    source_url: str
    source_path: str
    retrieved_from: str = ""
    families: dict[str, list[str]]  # documented family name -> transformers class names

    @property
    def title(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def architectures(self) -> frozenset[str]:
        return frozenset(a for names in self.families.values() for a in names)


@lru_cache(maxsize=1)
def declared_lists() -> tuple[DeclaredList, ...]:
    return tuple(DeclaredList.model_validate(json.loads(p.read_text()))
                 for p in sorted(DECLARED_DIR.glob("*.json")))
