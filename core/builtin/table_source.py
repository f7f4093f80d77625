"""``any.table``: a sample table saved by bioanon (``bioanon anonymize --out x.arrow``, ``SampleTable.save``);
``any.hf``: a Hugging Face data set saved with ``save_to_disk``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ..methods import DatasetSource, param

if TYPE_CHECKING:
    from ..table import SampleTable


@attrs.define(kw_only=True)
class SavedTable(DatasetSource):
    """A sample table saved as Arrow IPC (``.arrow``, memory-mapped) or Parquet (``.parquet``), e.g. the output of
    ``bioanon anonymize``, so an evaluation config can evaluate it (``[dataset] source = "any.table"``,
    ``path = "anon.arrow"``). Payloads, attributes and metadata (trait details, lineage) are kept as saved; the
    table is validated on load."""

    id: ClassVar[str] = "any.table"
    import_code: ClassVar[tuple[str, ...]] = ("bioanon.export",)  # part of the import's cache key
    needs_path: ClassVar[bool] = True

    def load(self, path: Any = None) -> SampleTable:
        from ..export import read_table

        return read_table(path)


@attrs.define(kw_only=True)
class HfDataset(DatasetSource):
    """A Hugging Face ``datasets`` data set saved with ``save_to_disk`` (a ``Dataset`` or a ``DatasetDict``,
    one split chosen with ``split``), evaluated as it is: ``[dataset] source = "any.hf"``, ``path = "my_data"``.
    Columns map to the sample table by name: the subject column is ``subject_column`` (by default the one named
    ``subject``, ``speaker``, ``speaker_id``, ``identity``, ...), the sample ids ``sample_id_column`` (row numbers
    when missing); array, numeric-list, ``Image`` and ``Audio`` columns become payloads (choose and rename with
    ``payload_columns = ["column:payload"]``, e.g. ``"img:image"`` or ``"embedding:features"``); the other scalar
    columns become
    attributes (``ClassLabel`` columns give their names). A table written with ``SampleTable.to_hf`` comes back
    exactly, metadata included. Needs ``pip install 'bioanon[hf]'``."""

    id: ClassVar[str] = "any.hf"
    import_code: ClassVar[tuple[str, ...]] = ("bioanon.interop",)  # part of the import's cache key
    needs_path: ClassVar[bool] = True

    split: str = param("", help="split of a DatasetDict ('' = its only split)")
    subject_column: str = param(
        "",
        help="column holding each sample's subject ('' = the one named subject, speaker, speaker_id, identity, "
        "person, ...)",
    )
    sample_id_column: str = param(
        "sample_id",
        help="column holding unique sample ids (row numbers when missing)",
        check=bool,
        check_text="a column name",
    )
    payload_columns: tuple[str, ...] = param(
        (),
        help="payload columns, 'column' or 'column:payload' (empty = every array, numeric list, Image and "
        "Audio column)",
    )
    attribute_columns: tuple[str, ...] = param(
        (), help="attribute columns, 'column' or 'column:name' (empty = every other scalar column)"
    )
    sample_rate: float = param(0.0, help="sample rate of audio stored as float lists (0 = from the data)", low=0.0)

    def load(self, path: Any = None) -> SampleTable:
        from ..table import SampleTable

        return SampleTable.from_hf(
            path,
            split=self.split or None,
            subject=self.subject_column or None,
            sample_id=self.sample_id_column,
            payloads=self.payload_columns or None,
            attributes=self.attribute_columns or None,
            sample_rate=self.sample_rate or None,
        )
