"""``any.table``: a sample table saved by bioanon (``bioanon anonymize --out x.arrow``, ``SampleTable.save``)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ..methods import DatasetSource


@attrs.define(kw_only=True)
class SavedTable(DatasetSource):
    """A sample table saved as Arrow IPC (``.arrow``, memory-mapped) or Parquet (``.parquet``), e.g. the output of
    ``bioanon anonymize``, so an evaluation config can evaluate it (``[dataset] source = "any.table"``,
    ``path = "anon.arrow"``). Payloads, attributes and metadata (trait details, lineage) are kept as saved; the
    table is validated on load."""

    id: ClassVar[str] = "any.table"
    needs_path: ClassVar[bool] = True

    def load(self, path: Any = None):
        from ..export import read_table

        return read_table(path)
