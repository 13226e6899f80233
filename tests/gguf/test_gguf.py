"""The GGUF reader and writer: round trips, every value type, and each malformed file refused."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from llamay import gguf
from llamay.errors import ModelFormatError, ModelNotFound
from llamay.gguf import RawTensor, Typed, ValueType

METADATA = {
    "general.architecture": "llama",
    "general.name": "tiny ünïcode 🦙",
    "test.u8": Typed(200, ValueType.UINT8),
    "test.i8": Typed(-100, ValueType.INT8),
    "test.u16": Typed(60000, ValueType.UINT16),
    "test.i16": Typed(-30000, ValueType.INT16),
    "test.u32": Typed(4_000_000_000, ValueType.UINT32),
    "test.i32": -2_000_000_000,
    "test.f32": 0.25,
    "test.bool": True,
    "test.u64": Typed(2**63 + 5, ValueType.UINT64),
    "test.i64": -(2**40),
    "test.f64": Typed(1e-300, ValueType.FLOAT64),
    "test.strings": ["a", "", "▁b", "<0x0A>"],
    "test.floats": np.array([1.5, -2.0], dtype=np.float32),
    "test.bools": np.array([True, False, True]),
    "test.nested": [[1, 2, 3], ["x", "y"], []],
    "test.empty": [],
}


def write_tiny(path: Path, **kwargs) -> Path:
    rng = np.random.default_rng(0)
    tensors = {
        "a.weight": rng.standard_normal((3, 64)).astype(np.float32),
        "b.weight": rng.standard_normal((2, 2, 32)).astype(np.float16),
        "c.weight": ("Q8_0", rng.standard_normal((4, 64)).astype(np.float32)),
    }
    return gguf.write(path, METADATA, tensors, **kwargs)


def test_round_trip_every_value_type(tmp_path):
    gg = gguf.read(write_tiny(tmp_path / "m.gguf"))
    assert gg.version == 3
    for key, expected in METADATA.items():
        got = gg.metadata[key]
        want = expected.value if isinstance(expected, Typed) else expected
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
        elif key == "test.nested":
            assert [list(x) for x in got] == want
        elif key == "test.empty":
            assert len(got) == 0
        else:
            assert got == want, key
    assert gg.value_type("test.u64") is ValueType.UINT64
    assert gg.value_type("test.i32") is ValueType.INT32
    assert gg.value_type("test.f64") is ValueType.FLOAT64


def test_python_ints_get_the_narrowest_type_that_holds_them(tmp_path):
    meta = {"small": 5, "big": -(2**40), "huge": 2**63 + 1, "mixed": [1, 2**63 + 1]}
    gg = gguf.read(gguf.write(tmp_path / "m.gguf", meta))
    assert [gg.value_type(k) for k in ("small", "big", "huge")] == [
        ValueType.INT32,
        ValueType.INT64,
        ValueType.UINT64,
    ]
    assert gg.metadata["huge"] == 2**63 + 1
    assert gg.metadata["mixed"].dtype == np.uint64
    with pytest.raises(OverflowError):
        gguf.write(tmp_path / "x.gguf", {"k": 2**64})


def test_tensors_are_zero_copy_views_with_gguf_shapes(tmp_path):
    gg = gguf.read(write_tiny(tmp_path / "m.gguf"))
    a, b, c = gg.tensors["a.weight"], gg.tensors["b.weight"], gg.tensors["c.weight"]
    assert (a.type, a.shape) == ("F32", (64, 3))
    assert (b.type, b.shape) == ("F16", (32, 2, 2))
    assert (c.type, c.shape, c.nbytes) == ("Q8_0", (64, 4), 4 * 2 * 34)
    assert not a.data.flags.owndata and not a.data.flags.writeable
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(a.dequantize(), rng.standard_normal((3, 64)).astype(np.float32))
    assert b.dequantize().shape == (2, 2, 32)
    for t in gg.tensors.values():
        assert (gg.data_offset + t.offset) % gg.alignment == 0


def test_version_2_and_custom_alignment(tmp_path):
    gg = gguf.read(write_tiny(tmp_path / "m.gguf", version=2, alignment=64))
    assert gg.version == 2 and gg.alignment == 64
    assert gg.metadata["general.alignment"] == 64
    assert all(t.offset % 64 == 0 for t in gg.tensors.values())


def test_copy_tensors_between_files(tmp_path):
    src = gguf.read(write_tiny(tmp_path / "a.gguf"))
    gguf.write(tmp_path / "b.gguf", src.typed_metadata(), src.tensors)
    dst = gguf.read(tmp_path / "b.gguf")
    assert dst.metadata.keys() == src.metadata.keys()
    for key in src.metadata:
        assert dst.value_type(key) == src.value_type(key), key
    for name, t in src.tensors.items():
        np.testing.assert_array_equal(dst.tensors[name].data, t.data)
        assert dst.tensors[name].shape == t.shape


def test_streamed_writing_in_any_pieces_is_the_same_file(tmp_path):
    src = gguf.read(write_tiny(tmp_path / "a.gguf"))
    infos = [gguf.TensorInfo(t.name, t.type, t.shape) for t in src.tensors.values()]
    everything = b"".join(t.data.tobytes() for t in src.tensors.values())

    def in_pieces(out):
        for start in range(0, len(everything), 7):  # pieces across tensor boundaries
            out.write(everything[start : start + 7])

    gguf.write_streamed(tmp_path / "b.gguf", src.typed_metadata(), infos, in_pieces)
    assert (tmp_path / "b.gguf").read_bytes() == (tmp_path / "a.gguf").read_bytes()


def test_streamed_writing_of_too_few_or_too_many_bytes_leaves_nothing(tmp_path):
    infos = [gguf.TensorInfo("x.weight", "F32", (4, 2))]
    with pytest.raises(ValueError, match=r"tensor 'x\.weight' has 31 of its 32 bytes"):
        gguf.write_streamed(tmp_path / "m.gguf", {}, infos, lambda out: out.write(bytes(31)))
    with pytest.raises(ValueError, match="1 bytes more than the tensor table holds"):
        gguf.write_streamed(tmp_path / "m.gguf", {}, infos, lambda out: out.write(bytes(33)))
    assert list(tmp_path.iterdir()) == []


def test_an_empty_string_array_stays_a_string_array(tmp_path):
    meta = {"test.none": gguf.StringArray.of([])}
    written = gguf.read(gguf.write(tmp_path / "m.gguf", meta))
    raw = (tmp_path / "m.gguf").read_bytes()
    assert list(written.metadata["test.none"]) == []
    assert struct.pack("<IIQ", ValueType.ARRAY, ValueType.STRING, 0) in raw


# --- malformed files -------------------------------------------------------------------------


def header(version=3, n_tensors=0, n_kv=0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def gstr(s: str) -> bytes:
    return struct.pack("<Q", len(s.encode())) + s.encode()


def tensor_info(name: str, shape, type_id: int, offset: int) -> bytes:
    return (
        gstr(name)
        + struct.pack("<I", len(shape))
        + struct.pack(f"<{len(shape)}Q", *shape)
        + struct.pack("<IQ", type_id, offset)
    )


def with_data(head: bytes, data_bytes: int) -> bytes:
    pad = -len(head) % 32
    return head + bytes(pad) + bytes(data_bytes)


def refused(tmp_path: Path, raw: bytes, *fragments: str) -> str:
    path = tmp_path / "bad.gguf"
    path.write_bytes(raw)
    with pytest.raises(ModelFormatError) as info:
        gguf.read(path)
    message = str(info.value)
    assert str(path) in message and "at byte" in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_bad_magic(tmp_path):
    refused(tmp_path, b"GGML" + bytes(100), "not a GGUF file", "at byte 0")


def test_unsupported_versions(tmp_path):
    refused(tmp_path, header(version=1), "unsupported GGUF version 1", "at byte 4")
    refused(tmp_path, header(version=4), "unsupported GGUF version 4")
    refused(tmp_path, b"GGUF" + struct.pack(">I", 3) + bytes(16), "big-endian")


def test_truncated_header(tmp_path):
    raw = header(n_kv=1) + gstr("general.name") + struct.pack("<I", 8) + gstr("hello")
    for cut in (2, 10, 20, len(raw) - 3):
        refused(tmp_path, raw[:cut], "truncated")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    with pytest.raises(ModelFormatError, match="empty file"):
        gguf.read(path)


def test_tensor_past_end_of_file(tmp_path):
    head = header(n_tensors=1) + tensor_info("w", (64,), 0, 0)
    refused(tmp_path, with_data(head, 100), "'w'", "runs past the end of the file")


def test_unknown_tensor_type(tmp_path):
    head = header(n_tensors=1) + tensor_info("w", (64,), 99, 0)
    refused(tmp_path, with_data(head, 256), "unknown ggml type id 99")


def test_unknown_value_type(tmp_path):
    raw = header(n_kv=1) + gstr("k") + struct.pack("<I", 42) + bytes(16)
    refused(tmp_path, raw, "unknown metadata value type 42")


def test_misaligned_tensor(tmp_path):
    head = header(n_tensors=1) + tensor_info("w", (8,), 0, 4)
    refused(tmp_path, with_data(head, 64), "not aligned")


def test_overlapping_tensors(tmp_path):
    head = header(n_tensors=2) + tensor_info("a", (64,), 0, 0) + tensor_info("b", (8,), 0, 32)
    refused(tmp_path, with_data(head, 256), "overlaps")


def test_duplicate_tensor_names(tmp_path):
    head = header(n_tensors=2) + tensor_info("a", (8,), 0, 0) + tensor_info("a", (8,), 0, 32)
    refused(tmp_path, with_data(head, 64), "duplicate tensor name 'a'")


def test_duplicate_metadata_keys(tmp_path):
    kv = gstr("k") + struct.pack("<I", 7) + b"\x01"
    refused(tmp_path, header(n_kv=2) + kv + kv, "duplicate metadata key 'k'")


def test_block_size_mismatch(tmp_path):
    head = header(n_tensors=1) + tensor_info("q", (30,), 8, 0)  # Q8_0 blocks hold 32
    refused(tmp_path, with_data(head, 64), "not a multiple", "block size 32")


def test_bad_alignment(tmp_path):
    kv = gstr("general.alignment") + struct.pack("<II", 4, 24)
    refused(tmp_path, header(n_kv=1) + kv, "power of two")


def test_too_many_dimensions(tmp_path):
    head = header(n_tensors=1) + tensor_info("w", (1, 1, 1, 1, 1), 0, 0)
    refused(tmp_path, with_data(head, 64), "5 dimensions")


@pytest.mark.parametrize(
    "raw",
    [
        header(n_tensors=2**60),
        header(n_kv=2**62),
        header(n_kv=1) + struct.pack("<Q", 2**62),  # key length
        header(n_kv=1) + gstr("k") + struct.pack("<IIQ", 9, 5, 2**61),  # array count
        header(n_kv=1) + gstr("k") + struct.pack("<IIQ", 9, 8, 2**40),  # string array count
    ],
    ids=["tensors", "kvs", "key-length", "array", "string-array"],
)
def test_absurd_counts_are_refused_before_allocating(tmp_path, raw):
    refused(tmp_path, raw, "more than the")


def test_absurd_shape(tmp_path):
    head = header(n_tensors=1) + tensor_info("w", (2**40, 2**40), 0, 0)
    refused(tmp_path, with_data(head, 64), "absurd shape")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ModelNotFound, match="no such file"):
        gguf.read(tmp_path / "nope.gguf")
    with pytest.raises(ModelFormatError, match="is a directory"):
        gguf.read(tmp_path)


def test_writer_rejects_wrong_sizes(tmp_path):
    with pytest.raises(ValueError, match="Q8_0 needs"):
        gguf.write(tmp_path / "x.gguf", {}, {"w": RawTensor("Q8_0", (32,), np.zeros(10, np.uint8))})
    with pytest.raises(ValueError, match="block size"):
        gguf.write(tmp_path / "x.gguf", {}, {"w": ("Q8_0", np.zeros(30, np.float32))})
    assert not (tmp_path / "x.gguf").exists()
    assert list(tmp_path.iterdir()) == []


def test_real_model_tensor_table(gemma_path):
    gg = gguf.read(gemma_path)
    assert gg.architecture == "gemma3"
    assert len(gg.tensors) == 236
    counts: dict[str, int] = {}
    for t in gg.tensors.values():
        counts[t.type] = counts.get(t.type, 0) + 1
    assert counts == {"F32": 109, "Q5_0": 81, "Q4_K": 27, "Q8_0": 10, "Q6_K": 9}
    assert gg.tensors["token_embd.weight"].shape == (640, 262144)
    assert len(gg.metadata["tokenizer.ggml.tokens"]) == 262144


def string_array(key: str, *items: bytes) -> bytes:
    """A metadata entry: an array of strings of these raw bytes."""
    body = b"".join(struct.pack("<Q", len(item)) + item for item in items)
    return gstr(key) + struct.pack("<IIQ", 9, 8, len(items)) + body


def test_a_string_array_reads_as_a_sequence_of_its_strings(tmp_path):
    items = ["", "a", "é", "日本", "", "\U0001f600 x"]
    path = tmp_path / "s.gguf"
    path.write_bytes(header(n_kv=1) + string_array("k", *(s.encode() for s in items)))
    got = gguf.read(path).metadata["k"]
    assert isinstance(got, gguf.StringArray)
    assert got == items and list(got) == items and len(got) == len(items)
    assert got[3] == "日本" and got[-1] == "\U0001f600 x" and got[1:4] == items[1:4]
    assert got.encoded(2) == "é".encode() and got.encoded_lengths().tolist() == [0, 1, 2, 6, 0, 6]
    assert got != items[:-1] and got != [*items[:-1], "x"]
    with pytest.raises(IndexError):
        got[len(items)]
    assert gguf.StringArray.of(items) == got


@pytest.mark.parametrize(
    ("items", "bad"),
    [
        ((b"ok", b"\xff", b"ok"), 1),  # a byte UTF-8 never has
        ((b"a\xc3", b"\xa9b"), 0),  # "é" cut across two strings: the first ends mid-character
        ((b"", b"ok", b"\xa9"), 2),  # a lone continuation byte
        ((b"ok", b"\xed\xa0\x80"), 1),  # an encoded surrogate
        ((b"ok", b"x\xe6\x97"), 1),  # the last string cut off mid-character
    ],
)
def test_a_string_that_is_not_utf8_is_named(tmp_path, items, bad):
    raw = header(n_kv=1) + string_array("k", *items)
    message = refused(tmp_path, raw, f"k[{bad}] is not valid UTF-8")
    first = len(header(n_kv=1)) + len(gstr("k")) + 4 + 4 + 8
    at = first + 8 * (bad + 1) + sum(len(item) for item in items[:bad])
    assert f"at byte {at}" in message, message
