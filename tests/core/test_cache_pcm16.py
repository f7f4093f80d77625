"""16-bit audio in the cache: stored as row-wise int16 differences in a zstd-compressed file (less than half the
bytes of float32), read back as the same float32 values bit for bit; anything else stored as before."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from bioanon.cache import Cache
from bioanon.cache.pcm16 import CODEC_KEY, MIN_BYTES, decode_pcm16, encode_pcm16
from bioanon.table import SampleTable

SR = 16000


def _speech_like(n_rows: int, seconds: float, seed: int = 0) -> list[np.ndarray]:
    """Smooth 16-bit signals (a few tones with an envelope), as decoded from 16-bit files: k / 32768."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_rows):
        t = np.arange(int(SR * seconds * rng.uniform(0.6, 1.0))) / SR
        x = sum(rng.uniform(0.05, 0.2) * np.sin(2 * np.pi * rng.uniform(80, 900) * t) for _ in range(4))
        x = x * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)) + rng.normal(0, 0.002, t.size)
        k = np.clip(np.round(x * 32768), -32768, 32767).astype(np.int16)
        if i == 0:
            k[:4] = [-32768, 32767, 0, -1]  # the extremes and zero
        out.append(k.astype(np.float32) / np.float32(32768))
    return out


def _table(audio: list[np.ndarray]) -> SampleTable:
    n = len(audio)
    return SampleTable.from_arrays(
        subject=[f"s{i % 3}" for i in range(n)],
        sample_id=[f"u{i}" for i in range(n)],
        payloads={"audio": audio},
        metadata={"trait": "voice", "sample_rate": SR},
    )


def _bits(arrays: list[np.ndarray]) -> list[bytes]:
    return [np.ascontiguousarray(a, dtype=np.float32).tobytes() for a in arrays]


def test_16_bit_audio_is_stored_compact_and_read_back_bit_for_bit(tmp_path):
    audio = _speech_like(12, 3.0)
    table = _table(audio)
    cache = Cache(tmp_path)
    cache.put_table("a" * 32, table)
    stored = pa.ipc.open_file(cache.table_path("a" * 32)).schema.field("audio")
    assert stored.type == pa.list_(pa.uint8()) and stored.metadata[CODEC_KEY] == b"pcm16-delta"
    size = (tmp_path / cache.table_path("a" * 32)).stat().st_size
    samples = sum(a.size for a in audio)
    assert size < 0.5 * 4 * samples, size / samples  # float32 would take 4 bytes a sample
    back = cache.get_table("a" * 32)
    assert _bits(back.payload("audio")) == _bits(audio)
    assert back.arrow.schema.equals(table.arrow.schema, check_metadata=True)
    ids = cache.get_table("a" * 32, columns=("subject", "sample_id"))
    assert ids.arrow.column_names == ["subject", "sample_id"] and list(ids.sample_ids) == list(table.sample_ids)


def test_row_selections_and_concatenations_of_an_encoded_table_read_the_same_rows(tmp_path):
    audio = _speech_like(10, 2.0, seed=1)
    cache = Cache(tmp_path)
    cache.put_table("a" * 32, _table(audio[:6]))
    cache.put_table("b" * 32, _table(audio[6:]))
    cache.put_rows("c" * 32, "a" * 32, [4, 0, 2])
    assert _bits(cache.get_table("c" * 32).payload("audio")) == _bits([audio[4], audio[0], audio[2]])
    cache.put_concat("d" * 32, ["a" * 32, "b" * 32])
    assert _bits(cache.get_table("d" * 32).payload("audio")) == _bits(audio)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda a: a[0].__setitem__(7, a[0][7] + np.float32(1e-6)),  # finer than 16 bits
        lambda a: a[1].__setitem__(3, np.float32(-0.0)),  # a negative zero: k = 0 would give +0
        lambda a: a[2].__setitem__(5, np.float32(1.5)),  # out of the 16-bit range
    ],
)
def test_audio_that_is_not_16_bit_is_stored_as_float32(tmp_path, spoil):
    audio = _speech_like(6, 2.0, seed=2)
    spoil(audio)
    cache = Cache(tmp_path)
    cache.put_table("a" * 32, _table(audio))
    assert pa.ipc.open_file(cache.table_path("a" * 32)).schema.field("audio").type == pa.list_(pa.float32())
    assert _bits(cache.get_table("a" * 32).payload("audio")) == _bits(audio)


def test_small_columns_and_other_types_are_left_as_they_are():
    small = _table(_speech_like(2, 0.1))
    assert small.arrow.column("audio").combine_chunks().values.nbytes < MIN_BYTES
    assert encode_pcm16(small.arrow) == (small.arrow, False)
    features = SampleTable.from_arrays(
        subject=["a"] * 2000, payloads={"features": np.zeros((2000, 256), np.float32)}
    )  # a fixed-shape tensor: read memory-mapped as always, never encoded
    assert encode_pcm16(features.arrow)[1] is False


def test_encoding_round_trips_empty_rows_slices_and_chunks(monkeypatch):
    import bioanon.cache.pcm16 as pcm16

    monkeypatch.setattr(pcm16, "MIN_BYTES", 0)
    audio = _speech_like(8, 1.0, seed=3)
    audio[3] = np.zeros(0, np.float32)
    whole = _table(audio).arrow
    chunked = pa.concat_tables([whole.slice(0, 3), whole.slice(3, 5)])  # two chunks
    for t in (whole, whole.slice(2, 5), chunked):
        enc, packed = encode_pcm16(t)
        assert packed
        back = decode_pcm16(enc)
        assert back.schema.equals(t.schema, check_metadata=True)
        got = [np.asarray(x.values, np.float32) for x in back.column("audio").combine_chunks()]
        want = [np.asarray(x.values, np.float32) for x in t.column("audio").combine_chunks()]
        assert _bits(got) == _bits(want)


def test_a_range_of_rows_reads_only_the_batches_that_hold_it(tmp_path, monkeypatch):
    import bioanon.cache.pcm16 as pcm16

    monkeypatch.setattr(pcm16, "BATCH_BYTES", 200_000)  # a few rows per batch
    audio = _speech_like(30, 2.0, seed=4)
    table = _table(audio)
    cache = Cache(tmp_path)
    cache.put_table("a" * 32, table)
    reader = pa.ipc.open_file(cache.table_path("a" * 32))
    assert reader.num_record_batches > 5
    read: list[int] = []
    original = pa.ipc.RecordBatchFileReader.get_batch
    monkeypatch.setattr(pa.ipc.RecordBatchFileReader, "get_batch", lambda self, i: read.append(i) or original(self, i))
    for start, stop in [(0, 3), (7, 19), (29, 30), (12, 12), (0, 30)]:
        read.clear()
        part = cache.get_table("a" * 32, rows=(start, stop))
        assert _bits(part.payload("audio")) == _bits(audio[start:stop])
        assert list(part.sample_ids) == list(table.sample_ids[start:stop])
        assert part.arrow.schema.equals(table.arrow.schema, check_metadata=True)
        if stop - start < 10:
            assert 0 < len(read) < reader.num_record_batches or start == stop  # not the whole file
    plain = _table([a + np.float32(1e-7) for a in audio])  # not 16-bit: memory-mapped, sliced as it is
    cache.put_table("b" * 32, plain)
    assert _bits(cache.get_table("b" * 32, rows=(5, 9)).payload("audio")) == _bits(plain.payload("audio")[5:9])
    cache.put_rows("c" * 32, "a" * 32, [9, 8, 7, 6])
    assert _bits(cache.get_table("c" * 32, rows=(1, 3)).payload("audio")) == _bits([audio[8], audio[7]])


def test_a_decoded_table_still_held_is_given_back_without_decoding_again(tmp_path, monkeypatch):
    import gc

    import bioanon.cache.store as store

    audio = _speech_like(8, 3.0, seed=5)
    cache = Cache(tmp_path)
    table = _table(audio)
    decodes: list[int] = []
    original = store.decode_pcm16
    monkeypatch.setattr(store, "decode_pcm16", lambda t: decodes.append(t.num_rows) or original(t))
    cache.put_table("a" * 32, table)
    first = cache.get_table("a" * 32)  # the table just stored is still held here: no decoding
    assert decodes == [] and _bits(first.payload("audio")) == _bits(audio)
    second = cache.get_table("a" * 32)  # after the first read marked the entry used (a new mtime)
    assert decodes == [] and second.arrow is first.arrow
    del table, first, second
    gc.collect()
    again = cache.get_table("a" * 32)  # nothing holds it any more: decoded from the file
    assert decodes == [8] and _bits(again.payload("audio")) == _bits(audio)
    assert _bits(cache.get_table("a" * 32).payload("audio")) == _bits(audio) and decodes == [8]
    (tmp_path / cache.table_path("a" * 32)).unlink()  # gone from the disk: a miss, whoever holds it
    assert cache.get_table("a" * 32) is None
